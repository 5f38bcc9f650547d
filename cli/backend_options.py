"""The options every command with units of work shares: where they run (docs/scale-out.md).

``--backend local`` (the default) runs the units in this process; ``--backend ray`` runs them on
Ray workers, on this machine (no ``--address``) or on a cluster. The options are not settings
of the run: a run started on one backend resumes on the other.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from embodia.cli.root import finite

BackendOption = Annotated[
    str,
    typer.Option("--backend", help="Where the units run: local (this process) or ray (docs/scale-out.md)."),
]
NumWorkersOption = Annotated[
    int | None,
    typer.Option("--num-workers", help="Ray workers (default: as many as the cluster's CPUs hold)."),
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address", help="Ray cluster: auto or ray://HOST:PORT (default: start Ray on this machine)."
    ),
]
WorkerCpusOption = Annotated[
    float, typer.Option("--worker-cpus", help="CPUs each Ray worker reserves.", callback=finite)
]
WorkerGpusOption = Annotated[
    float,
    typer.Option("--worker-gpus", help="GPUs each Ray worker reserves (for a policy).", callback=finite),
]


def backend_from(
    backend: str,
    num_workers: int | None,
    address: str | None,
    worker_cpus: float,
    worker_gpus: float,
    *,
    concurrency: int = 1,
) -> Any:
    """The :class:`~embodia.core.scale_out.Backend` the options name (checked: one line on error)."""
    from embodia.core.scale_out import Backend

    return Backend(
        kind=backend,  # type: ignore[arg-type]  # checked by Backend itself, naming the choices
        num_workers=num_workers,
        address=address,
        num_cpus=worker_cpus,
        num_gpus=worker_gpus,
        concurrency=concurrency,
    )

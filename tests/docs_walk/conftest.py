"""The docs walk's session state: one scratch checkout per page, one lazily started vLLM server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from docs_walk.runner import DocsWalk


@pytest.fixture(scope="session")
def docs_walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsWalk]:
    walk = DocsWalk(tmp_path_factory.mktemp("docs-walk"))
    yield walk
    walk.close()

"""Every sh/bash/python block of README.md and docs/*.md, run as written (docs/docs-test.md).

One test per block, ``page:N``; a page's blocks run in order in one scratch copy of the
checkout, so a block may use what an earlier one wrote. Selecting one block (``-k``) runs the
page's earlier blocks first. ``make test-docs`` runs this module; ``make test`` leaves it out.
"""

from __future__ import annotations

import pytest
from docs_walk.blocks import REPOSITORY, Block, all_blocks
from docs_walk.runner import DocsWalk

pytestmark = pytest.mark.docs

BLOCKS = all_blocks(REPOSITORY)


@pytest.mark.parametrize("block", BLOCKS, ids=[block.test_id for block in BLOCKS])
def test_block_runs_as_written(block: Block, docs_walk: DocsWalk) -> None:
    misplaced = block.misplaced_markers()
    assert not misplaced, (
        f"{block.test_id} (line {block.line}): a marker on line(s) {misplaced} of the block; "
        "it must be the first line, where the reader sees it"
    )
    malformed = block.malformed_marker()
    assert malformed is None, (
        f"{block.test_id} (line {block.line}): {malformed!r} is no marker docs/docs-test.md defines"
    )
    page = docs_walk.page(block.page)
    outcome = page.outcome(block)
    if outcome.status == "skipped":
        pytest.skip(outcome.message)
    if outcome.status == "failed":
        earlier = page.earlier_failures(block)
        note = f"\n(earlier blocks of this page failed too: {', '.join(earlier)})" if earlier else ""
        pytest.fail(outcome.message + note, pytrace=False)
    assert outcome.status == "passed"

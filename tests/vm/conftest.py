"""Every VM test module holds both VM clusters' accounting locks shared while it runs, so a
test that stops a VM's slurmdbd (``vm.slurmdbd_stopped``, that cluster's lock exclusive)
runs while no other module asks sacct, slurmrestd or sacctmgr there, on any xdist worker.
A module that stops slurmdbd itself sets ``STOPS_SLURMDBD = True`` and takes its cluster's
exclusive lock in its test; one that disturbs other daemons (``vm.alone``) sets
``DISTURBS_CLUSTER = True``. Two such modules on different clusters run side by side."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import vm


@pytest.fixture(scope="module", autouse=True)
def _accounting_in_use(request: pytest.FixtureRequest) -> Iterator[None]:
    if vm.disturbs(request.module):
        yield
        return
    with vm.accounting_in_use():
        yield

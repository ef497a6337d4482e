"""The contract's tables name real cases and surfaces: an entry that names nothing would
mark nothing, and a case would run unmarked where it cannot pass."""

from __future__ import annotations

from . import test_contract
from .conftest import CANNOT, DEFECTS, SURFACES


def test_every_entry_of_the_tables_names_a_contract_case_and_a_surface() -> None:
    cases = {name for name in vars(test_contract) if name.startswith("test_")}
    for case, surface in [*CANNOT, *DEFECTS]:
        assert case in cases, case
        assert surface in SURFACES, surface
    assert not set(CANNOT) & set(DEFECTS)  # skipped or expected to fail, not both

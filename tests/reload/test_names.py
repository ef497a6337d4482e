"""A watched module may not take the name of an installed module, also in a start of many
modules (which lists ``sys.path`` once instead of searching it per name)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from hotseam import Context
from hotseam.reload import ModuleState, Reloader

from .conftest import write

pytestmark = pytest.mark.anyio

MANY = 20  # more new names than the listing's break-even point


def _fill(folder: Path, prefix: str) -> None:
    for number in range(MANY):
        write(folder / f"{prefix}_{number:02}.py", "X = 1\n")


def _refused(reloader: Reloader, path: Path) -> str:
    status = reloader.status_of(path)
    assert status.state is ModuleState.FAILED
    assert status.error is not None
    assert status.error.type == "ModuleNameClashError"
    return status.error.message


@pytest.mark.parametrize("count", [1, MANY], ids=["one new name", "a start of many"])
async def test_a_name_installed_in_a_sys_path_folder_is_refused(
    context: Context, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "nm_installed_a.py").write_text("X = 'installed'\n")
    monkeypatch.syspath_prepend(str(site))
    if count > 1:
        _fill(folder, "nm_fill")
    ours = write(folder / "nm_installed_a.py", "X = 'watched'\n")
    async with Reloader(context, [folder], watch=False) as reloader:
        message = _refused(reloader, ours)
        assert f"would shadow the installed module {site / 'nm_installed_a.py'}" in message
        assert "nm_installed_a" not in sys.modules


async def test_a_name_a_folder_provides_in_another_case_or_as_a_package_is_checked(
    context: Context, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package folder (also one without ``__init__.py``) is an installed name too."""
    site = tmp_path / "site"
    (site / "nm_pkg_b").mkdir(parents=True)
    (site / "nm_pkg_b" / "__init__.py").write_text("")
    (site / "nm_space_c").mkdir()
    monkeypatch.syspath_prepend(str(site))
    _fill(folder, "nm_fill")
    package = write(folder / "nm_pkg_b.py", "X = 1\n")
    namespace = write(folder / "nm_space_c.py", "X = 1\n")
    async with Reloader(context, [folder], watch=False) as reloader:
        assert str(site / "nm_pkg_b" / "__init__.py") in _refused(reloader, package)
        assert str(site / "nm_space_c") in _refused(reloader, namespace)
        assert reloader.status_of(folder / "nm_fill_00.py").state is ModuleState.ACTIVE


async def test_a_zip_file_on_sys_path_is_searched_name_by_name(
    context: Context, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "vendored.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("nm_zipped_d.py", "X = 'zipped'\n")
    monkeypatch.syspath_prepend(str(archive))
    _fill(folder, "nm_fill")
    ours = write(folder / "nm_zipped_d.py", "X = 'watched'\n")
    async with Reloader(context, [folder], watch=False) as reloader:
        assert "would shadow the installed module" in _refused(reloader, ours)


async def test_a_folder_a_module_body_adds_to_sys_path_is_seen_by_the_names_after_it(
    context: Context, folder: Path, tmp_path: Path
) -> None:
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "nm_vendored_e.py").write_text("X = 'vendored'\n")
    write(folder / "nm_a_first.py", f"import sys\nsys.path.insert(0, {str(vendor)!r})\n")
    _fill(folder, "nm_fill")
    ours = write(folder / "nm_vendored_e.py", "X = 'watched'\n")
    try:
        async with Reloader(context, [folder], watch=False) as reloader:
            assert str(vendor / "nm_vendored_e.py") in _refused(reloader, ours)
    finally:
        sys.path.remove(str(vendor))

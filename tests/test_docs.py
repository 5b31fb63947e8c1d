"""The documentation site: every nav entry has its page, `mkdocs build --strict` passes, a broken link or a missing
page fails it, and the options tables list every option of the command they name."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SKIP = "mkdocs is not installed: `make docs` (or `pip install -e .[docs]`) installs it"


def nav_pages(nav) -> list[str]:
    """Every page path a MkDocs nav names, in order."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return [page for item in nav for page in nav_pages(item)]


def site_config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def build(config_file: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config_file), "-d",
                           str(site)], cwd=ROOT, env=env, capture_output=True, text=True)


def test_every_nav_entry_has_its_page():
    config = site_config()
    pages = nav_pages(config["nav"])
    missing = [page for page in pages if not (ROOT / config["docs_dir"] / page).is_file()]
    assert not missing, f"nav entries without a page under docs/: {missing}"
    for family in ("darkroom", "keydoor", "bandit", "rlhf", "gridworld", "textworld", "math"):
        assert f"families/{family}.md" in pages
    assert {"index.md", "design.md", "families/new-family.md", "experiments/index.md"} <= set(pages)


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason=SKIP)
    pytest.importorskip("mkdocstrings_handlers.python", reason=SKIP)
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    for page in nav_pages(site_config()["nav"]):
        name = page[:-len(".md")]
        html = tmp_path / "site" / (name[:-len("index")] if name.endswith("index") else name + "/") / "index.html"
        assert html.is_file(), f"{page} was not built"
    assert "<table>" in (tmp_path / "site" / "families" / "bandit" / "index.html").read_text()


def test_broken_link_or_missing_page_fails_the_build(tmp_path):
    pytest.importorskip("mkdocs", reason=SKIP)
    pytest.importorskip("mkdocstrings_handlers.python", reason=SKIP)
    config = site_config()
    config["hooks"] = [str(ROOT / hook) for hook in config["hooks"]]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the page](missing.md).\n")
    (docs / "page.md").write_text("# Page\n")
    config.update(docs_dir=str(docs), nav=[{"Home": "index.md"}, {"Page": "page.md"}])
    file = tmp_path / "mkdocs.yml"
    file.write_text(yaml.safe_dump(config))
    result = build(file, tmp_path / "link")
    assert result.returncode != 0 and "missing.md" in result.stdout + result.stderr
    (docs / "index.md").write_text("# Home\n")
    config["nav"].append({"Gone": "gone.md"})
    file.write_text(yaml.safe_dump(config))
    result = build(file, tmp_path / "nav")
    assert result.returncode != 0 and "gone.md" in result.stdout + result.stderr


def test_options_tables_list_every_option():
    pytest.importorskip("mkdocs", reason=SKIP)
    sys.path.insert(0, str(ROOT / "docs_hooks"))
    try:
        import options as hook
    finally:
        sys.path.remove(str(ROOT / "docs_hooks"))
    from mkdocs.exceptions import PluginError

    from tasks.textworld.config import GenerateConfig

    config_cls = hook.resolve("ad generate textworld")
    assert config_cls is GenerateConfig
    assert hook.resolve("tasks.textworld.config:GenerateConfig") is GenerateConfig
    text = hook.options_markdown(config_cls)
    for field in dataclasses.fields(GenerateConfig):
        assert f"`--{field.name.replace('_', '-')}`" in text
    assert "#### LoRA adapter settings" in text  # a shared option class is its own section
    page = hook.on_page_markdown("# T\n\n<!-- options: ad demo --task bandit -->\n\nafter\n", None, None, None)
    assert "| `--out` |" in page and page.rstrip().endswith("after")
    with pytest.raises(PluginError, match="nosuchfamily"):
        hook.resolve("ad generate nosuchfamily")

"""Lines of Python in `ad/`, `tasks/` and `models/`: a git revision from before the family-shape redesign against
this checkout, in total and like for like.

Capabilities were added since that revision (the recorder, three families, two data sources, the DPT objective,
Box actions, the math CPU engine), so the total alone mixes the redesign with new features. The like-for-like
figure leaves out the files that serve only an added capability (:data:`ADDED`, a path or a folder per entry); an
added capability that lives inside a file that existed before (an option alias, the DPT loss beside AD's, a Box
action branch) is not separated out and counts as now. Lines are counted as ``str.splitlines`` counts them, blank
lines and docstrings included, in every ``.py`` file under the three packages; a second like-for-like figure counts
code lines only (no docstring, comment or blank line).

    python benchmarks/code_lines.py                       # 6427bfd (before) against this working tree
    python benchmarks/code_lines.py --after HEAD --list   # a commit instead of the working tree; lines per file

The before revision is read with ``git show REV:path`` (no checkout needed).
"""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
PACKAGES = ("ad", "tasks", "models")
#: Capabilities added since the before revision -> the files (or folders, ending in "/") that serve only them.
ADDED: dict[str, tuple[str, ...]] = {
    "learning-history recorder for any training loop (ad.record)": ("ad/record/",),
    "gym family (any Gymnasium env, ad generate gym)": ("tasks/gym/",),
    "LunarLander family": ("tasks/lunarlander/",),
    "Meta-World family": ("tasks/metaworld/",),
    "noise-distillation source (--source noise)": (
        "tasks/noise.py", "tasks/grid/noise.py", "tasks/bandit/noise.py", "tasks/darkroom/noise_generate.py",
        "tasks/keydoor/noise_generate.py"),
    "random-context source (--source random)": ("tasks/random_source.py", "tasks/bandit/random.py"),
    "the options of those two sources, declared once": ("tasks/source_options.py",),
    "DPT objective's optimal actions": ("tasks/bandit/optimal.py", "tasks/darkroom/optimal.py",
                                        "tasks/keydoor/optimal.py"),
    "Box (continuous) actions of the AD transformer": ("models/rl/box_actions.py",),
    "math fast engine and CPU preset (batched sampler, RLOO loop)": ("tasks/math/reinforce.py",
                                                                     "tasks/lm_sampling.py"),
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def python_sources(repo: Path, rev: str | None) -> dict[str, str]:
    """The text of each ``.py`` file under the packages: at ``rev``, or in the working tree (tracked and untracked
    files git does not ignore) when ``rev`` is None."""
    if rev is None:
        names = _git(repo, "ls-files", "--cached", "--others", "--exclude-standard", "--", *PACKAGES).split()
        return {n: (repo / n).read_text() for n in sorted(set(names)) if n.endswith(".py") and (repo / n).is_file()}
    names = _git(repo, "ls-tree", "-r", "--name-only", rev, "--", *PACKAGES).split()
    return {n: _git(repo, "show", f"{rev}:{n}") for n in names if n.endswith(".py")}


def code_lines(text: str) -> int:
    """Lines of ``text`` that are neither blank, a comment, nor part of a docstring."""
    docs = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and \
                ast.get_docstring(node) is not None:
            docs.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    return sum(1 for i, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def is_added(name: str) -> bool:
    """Whether ``name`` serves only a capability added since the before revision."""
    return any(name == p or (p.endswith("/") and name.startswith(p)) for paths in ADDED.values() for p in paths)


def per_package(files: dict[str, int]) -> dict[str, int]:
    """Lines per package, and ``total``."""
    counts = {p: sum(n for f, n in files.items() if f.startswith(p + "/")) for p in PACKAGES}
    return {**counts, "total": sum(counts.values())}


def main(argv: list[str] | None = None) -> None:
    """Count, print and write the figures (``--quick``: the same count, written to the quick file)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE, help="git checkout to count in")
    parser.add_argument("--before", default="6427bfd", help="revision before the redesign")
    parser.add_argument("--after", default=None, help="revision to count as now (default: the working tree)")
    parser.add_argument("--quick", action="store_true", help="the same count, written to code_lines_quick.json")
    parser.add_argument("--list", action="store_true", help="also print the lines of every file now")
    args = parse_args(parser, argv)
    sources = {"before": python_sources(args.repo, args.before), "now": python_sources(args.repo, args.after)}
    before, now = ({f: len(t.splitlines()) for f, t in sources[k].items()} for k in ("before", "now"))
    code = {"before": sum(code_lines(t) for t in sources["before"].values()),
            "like for like": sum(code_lines(t) for f, t in sources["now"].items() if not is_added(f))}
    alike = {f: n for f, n in now.items() if not is_added(f)}
    excluded = {f: n for f, n in now.items() if is_added(f)}
    counts = {"before": per_package(before), "now": per_package(now), "like for like": per_package(alike)}
    if args.list:
        for name, lines in now.items():
            print(f"{lines:6d} {name}{'   (added capability)' if is_added(name) else ''}")
    for label, c in counts.items():
        print(f"{label:14s} " + ", ".join(f"{p}/ {c[p]}" for p in PACKAGES) + f", total {c['total']}")
    print(f"excluded from like for like: {len(excluded)} files, {sum(excluded.values())} lines")
    print(f"code lines only (no docstrings, comments, blank lines): before {code['before']}, like for like "
          f"{code['like for like']}")
    what = {"excluded_capabilities": {k: list(v) for k, v in ADDED.items()},
            "excluded_files": excluded, "before_revision": args.before, "after_revision": args.after or "working tree"}
    figures = [figure("lines of Python in ad/, tasks/, models/, like for like (files of capabilities added since "
                      "the before revision left out)", "lines", counts["like for like"]["total"],
                      counts["before"]["total"], "< 1x", higher_is_better=False)]
    figures[0].update(headline=True, short="lines of Python in ad/, tasks/, models/ serving what existed before "
                                           "the redesign", vs="before the redesign", **what)
    figures.append(figure("lines of Python in ad/, tasks/, models/, all (added capabilities included)", "lines",
                          counts["now"]["total"], counts["before"]["total"], "-", higher_is_better=False))
    figures.append(figure("code lines (no docstring, comment or blank line) in ad/, tasks/, models/, like for like",
                          "lines", code["like for like"], code["before"], "< 1x", higher_is_better=False))
    for p in PACKAGES:
        figures.append(figure(f"lines of Python in {p}/, like for like", "lines", counts["like for like"][p],
                              counts["before"][p], "< 1x", higher_is_better=False))
    report("code_lines", figures, args.quick, capability="Code a contributor reads", page="usability",
           config=None if args.quick else "configs/usability/code_lines.yaml")


if __name__ == "__main__":
    main()

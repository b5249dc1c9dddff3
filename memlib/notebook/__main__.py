"""``python -m memlib.notebook``: the course's maintenance commands, run from the
repository root. They write course files, never a store: hence not in ``memlib``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path


def _solutions(args: argparse.Namespace) -> None:
    from .solutions import write_solutions

    for target in write_solutions(args.folder, args.names, execute=not args.no_execute):
        print(f"wrote {target}")


def _slides(args: argparse.Namespace) -> None:
    from ._common import write_notebook
    from .slides import split_catalog, with_slides
    from .translate import catalog_path

    root = Path.cwd()
    # The English notebooks are the folder whose editions (notebooks/LANG/, i18n/LANG/)
    # are built from them: the sections of the cells split there are split alike.
    editions = sorted(
        p.name for p in (root / "i18n").glob("*") if p.is_dir() and (args.folder / p.name).is_dir()
    )
    for path in sorted(args.folder.glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        catalogs = {}
        for lang in editions:
            catalog_file = catalog_path(root, lang, path.name)
            if catalog_file.exists():
                text = catalog_file.read_text(encoding="utf-8")
                new = split_catalog(text, notebook, path.name)
                if new != text:
                    catalogs[catalog_file] = new
        updated = with_slides(notebook)  # everything checked before anything is written
        if updated != notebook:
            write_notebook(path, updated)
            print(f"wrote {path}")
        for catalog_file, text in catalogs.items():
            catalog_file.write_text(text, encoding="utf-8")
            print(f"wrote {catalog_file.relative_to(root)}")


def _translate(args: argparse.Namespace) -> None:
    from ._common import execute_notebook, selected_notebooks, write_notebook
    from .translate import catalog_path, catalog_template, parse_catalog, translated_notebook

    root = Path.cwd()
    out_dir = args.folder / args.lang
    out_dir.mkdir(exist_ok=True)
    for path in selected_notebooks(args.folder, args.names):
        english = json.loads(path.read_text(encoding="utf-8"))
        catalog_file = catalog_path(root, args.lang, path.name)
        old = (
            parse_catalog(catalog_file.read_text(encoding="utf-8")) if catalog_file.exists() else {}
        )
        if args.template:
            catalog_file.parent.mkdir(parents=True, exist_ok=True)
            catalog_file.write_text(catalog_template(english, old), encoding="utf-8")
            print(f"wrote {catalog_file.relative_to(root)}")
            continue
        edition = translated_notebook(english, old, path.name, args.lang)
        if not args.no_execute:
            edition = execute_notebook(edition, out_dir)
        write_notebook(out_dir / path.name, edition)
        print(f"wrote {out_dir / path.name}")


def _reports(args: argparse.Namespace) -> None:
    from .reports import write_packaged_reports

    root = Path.cwd()
    for path in write_packaged_reports(root / "reports", root / "memlib" / "data" / "reports"):
        print(f"wrote {path.relative_to(root)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memlib.notebook", description="Maintain the course's generated files."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    solutions = commands.add_parser("solutions", help="write and run each notebook's twin")
    solutions.add_argument("names", nargs="*", help="notebooks to rebuild (default: all)")
    solutions.add_argument("--folder", type=Path, default=Path("notebooks"))
    solutions.add_argument(
        "--no-execute",
        action="store_true",
        help="write sources only (the twin then has no outputs)",
    )
    solutions.set_defaults(run=_solutions)
    slides = commands.add_parser(
        "slides",
        help="split markdown cells at headings, set the RISE slide metadata and settings of "
        "every notebook; for the English notebooks, split the catalogs' sections alike",
    )
    slides.add_argument("--folder", type=Path, default=Path("notebooks"))
    slides.set_defaults(run=_slides)
    translate = commands.add_parser(
        "translate", help="write and run an edition (zh) from its catalogs"
    )
    translate.add_argument("lang", help="the edition: i18n/LANG/ → notebooks/LANG/")
    translate.add_argument("names", nargs="*", help="notebooks to rebuild (default: all)")
    translate.add_argument("--folder", type=Path, default=Path("notebooks"))
    translate.add_argument(
        "--template",
        action="store_true",
        help="(re)write the catalogs instead: current translations kept, "
        "every new or changed English cell to translate",
    )
    translate.add_argument(
        "--no-execute",
        action="store_true",
        help="write sources only (the edition then has no outputs)",
    )
    translate.set_defaults(run=_translate)
    reports = commands.add_parser("reports", help="refresh memlib/data/reports from reports/")
    reports.set_defaults(run=_reports)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (ValueError, KeyError, OSError) as exc:
        # A stale catalog, an answer cell of no exercise, a missing file: one line, the
        # way ``memlib`` reports bad input. Anything else is a bug and keeps its traceback.
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"python -m memlib.notebook: error: {message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

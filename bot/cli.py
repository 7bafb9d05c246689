"""`fieldguide`: a thin command line over the library in index/ and router/."""
from __future__ import annotations

import argparse
import json
import sys

from .settings import Settings


def _embedder(settings: Settings):
    from index.embedders import make_embedder

    return make_embedder(settings.voyage_api_key, settings.voyage_model, settings.voyage_base_url, settings.timeout)


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def cmd_index(args, settings: Settings) -> int:
    from tqdm import tqdm

    from index.indexer import index_folder

    bar = None

    def start(total: int):
        nonlocal bar
        if total:
            bar = tqdm(total=total, desc="Embedding", unit="text", file=sys.stderr, disable=args.quiet or None)

    embedder = _embedder(settings)
    try:
        summary = index_folder(args.db or settings.db, args.docs_dir, embedder, settings.chunk_chars,
                               on_embed_start=start, on_embedded=lambda n: bar and bar.update(n))
    finally:
        if bar:
            bar.close()
    result = summary.counts()
    if args.json:
        _print_json(result)
        return 0
    print(f"Indexed {args.docs_dir} into {args.db or settings.db} ({summary.model})")
    print(f"  added {len(summary.added)} · changed {len(summary.changed)} · removed {len(summary.removed)}"
          f" · unchanged {len(summary.unchanged)} · skipped {len(summary.skipped)}")
    print(f"  {summary.chunks} chunks · {summary.embedded} texts embedded · {summary.seconds:.1f} s")
    for s in summary.skipped:
        print(f"  skipped {s['path']}: {s['reason']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fieldguide",
        description="Answer questions from a folder of markdown docs, with citations; offline without API keys.",
        epilog="Settings come from the environment and .env (see .env.example). Run 'fieldguide COMMAND --help' for details.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, func, db: bool = True):
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        if db:
            sp.add_argument("--db", help="index file (default: FIELDGUIDE_DB, .fieldguide/index.db)")
        return sp

    sp = add("index", "Index a folder of markdown docs (incremental: only changed text is embedded).", cmd_index)
    sp.add_argument("docs_dir", metavar="DOCS_DIR", help="folder of *.md / *.markdown files with YAML front matter")
    sp.add_argument("--json", action="store_true", help="print the run summary as one JSON object")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    from index.embedders import EmbeddingError
    from index.indexer import IndexError_
    from index.store import IndexMissing, ModelMismatch

    args = build_parser().parse_args(argv)
    settings = Settings.load()
    try:
        return args.func(args, settings)
    except (IndexError_, IndexMissing, ModelMismatch, EmbeddingError) as e:
        print(f"fieldguide: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fieldguide: interrupted; the index still holds its last complete run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

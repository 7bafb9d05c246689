"""The runtime install's size against the dev venv's: the wheel installed with
deploy/install-runtime.sh (no torch, the int8 model) into a fresh venv as the Dockerfile installs
it (--no-bytecode: none in the image), then with its bytecode compiled (as .ci/wheel-check
and an install on a machine have it), `du` of each. With --image NAME, also the size of a built
image as the container engine reports it. Writes RESULTS.md section runtime-size.

    python bench/runtime_size.py [--image localhost/fieldguide:dev]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import ROOT, table, write_section


def du(path: Path) -> int:
    """Bytes on disk under `path` (du -sb: hard links counted once)."""
    return int(
        subprocess.run(
            ["du", "-sb", str(path)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )


def image_size(name: str) -> int | None:
    for engine in ("podman", "docker"):
        if shutil.which(engine):
            out = subprocess.run([engine, "image", "inspect", name], capture_output=True, text=True)
            if out.returncode == 0:
                return int(json.loads(out.stdout)[0]["Size"])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", help="also report this built image's size")
    parser.add_argument("--base", help="and the size of the base image it was built on")
    args = parser.parse_args()
    dev = Path(sys.prefix)
    model = dev / "share" / "fieldguide" / "onnx-model"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # built from a copy of the files git knows: a stale build/ in the checkout would leak
        # removed modules into the wheel
        listed = (
            subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=ROOT,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        for name in filter(None, listed):
            if (ROOT / name).is_file():
                (work / "src" / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, work / "src" / name)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-qq",
                "--no-deps",
                "-w",
                str(work / "dist"),
                str(work / "src"),
            ],
            check=True,
        )
        [wheel] = (work / "dist").glob("fieldguide-*.whl")
        subprocess.run(
            [
                str(ROOT / "deploy" / "install-runtime.sh"),
                "--no-bytecode",  # as the Dockerfile installs it
                str(work / "venv"),
                str(wheel),
                str(model),
            ],
            check=True,
            env={
                **os.environ,
                "PIP_QUIET": "2",
                "PIP_NO_COMPILE": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            },
        )
        image_install = du(work / "venv")
        runtime_model = du(work / "venv" / "share" / "fieldguide" / "onnx-model")
        site_packages = next((work / "venv" / "lib").glob("python3*/site-packages"))
        largest = sorted(((du(p), p.name) for p in site_packages.iterdir()), reverse=True)[:8]
        subprocess.run(
            [str(work / "venv" / "bin" / "python"), "-m", "compileall", "-q", str(site_packages)],
            check=False,  # a package's test data that does not compile is not ours to fix
            capture_output=True,
        )
        runtime = du(work / "venv")
    site = next((dev / "lib").glob("python3*/site-packages"))
    torch = sum(du(p) for p in site.glob("torch*")) + sum(du(p) for p in site.glob("nvidia*"))
    mb = lambda b: f"{b / 1e6:,.0f} MB"  # noqa: E731
    rows = [
        [
            "runtime install as the image makes it (fresh venv + model, no bytecode)",
            mb(image_install),
        ],
        ["  of which the int8 model + tokenizer", mb(runtime_model)],
        *[[f"  of which {name}", mb(size)] for size, name in largest],
        ["the same with its bytecode compiled (.ci/wheel-check, a machine's install)", mb(runtime)],
        ["dev venv (`make setup`: torch, export and dev tools, both models)", mb(du(dev))],
        ["  of which torch", mb(torch)],
    ]
    if args.image and (size := image_size(args.image)) is not None:
        rows.append([f"image `{args.image}` (its base included)", mb(size)])
        if args.base and (base := image_size(args.base)) is not None:
            rows.append([f"  of which the base `{args.base}`", mb(base)])
    body = (
        "## Runtime install size\n\n"
        f"`python bench/runtime_size.py{' --image ' + args.image if args.image else ''}"
        f"{' --base ' + args.base if args.base else ''}` — the"
        " wheel installed by deploy/install-runtime.sh (what the Dockerfile runs, and what"
        " .ci/wheel-check tests) into a fresh venv: onnxruntime and the int8 model, no torch;"
        " against the dev venv this runs in. Sizes are `du -sb` (bytes, 1 MB = 10^6). An image"
        " is its base plus the first row (a file or two besides);"
        + (
            " the image row is the container engine's figure."
            if args.image
            else " no container engine ran here, so no image was built or measured."
        )
        + "\n\n"
        + table(["install", "size"], rows)
    )
    print(body)
    write_section("runtime-size", body)


if __name__ == "__main__":
    main()

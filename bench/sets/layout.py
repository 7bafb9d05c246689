"""Lay out a real-question set's docs (bench/sets/NAME/docs, git-ignored) from a git copy of its
project at the commit its SOURCE.md names, by the rules SOURCE.md gives.

    python bench/sets/layout.py NAME --git PATH_TO_GIT_DIR [--out DIR]

NAME is fastapi, traefik, duckdb, chezmoi, uv or mise; PATH_TO_GIT_DIR any clone or bare mirror
holding the commit (duckdb: a clone of duckdb/duckdb-web or a fork mirroring it at that commit).
The output is DIR (default bench/sets/NAME/docs), emptied first.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
COMMITS = {
    "fastapi": "c3f316b7e814667e8ee81e03a7330d00ee61e45c",
    "traefik": "fd5a576df2e8aeb0bfc8a96b6ef6e60a61f7ec0a",
    "duckdb": "0e913395a09b2f8559cbe0c9f26b874cc7f1a0e1",
    "chezmoi": "38b49b6c70daf0071be98b2ec01b2ab08498e011",
    "uv": "26a9dd4b2125bc271b47855e1fa0c49af3365db5",
    "mise": "70e94a1f89fa27f3bbc2b933c6891a124f5ef04c",
}
FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.S)


class Repo:
    def __init__(self, git_dir: str, commit: str):
        self.git, self.commit = ["git", f"--git-dir={git_dir}"], commit

    def files(self, prefix: str) -> list[str]:
        out = subprocess.run(
            [*self.git, "ls-tree", "-r", "--name-only", self.commit, prefix],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return out.split("\n")[:-1]

    def show(self, path: str) -> str:
        return subprocess.run(
            [*self.git, "show", f"{self.commit}:{path}"], capture_output=True, text=True, check=True
        ).stdout


def split_front(text: str) -> tuple[dict, str]:
    m = FRONT.match(text)
    if not m:
        return {}, text
    return (yaml.safe_load(m.group(1)) or {}), text[m.end() :]


def first_heading(body: str) -> str:
    m = re.search(r"^# (.+)$", body, re.M)
    return m.group(1).strip() if m else ""


def directory_url(base: str, rel: str) -> str:
    p = rel[: -len(".md")]
    if p == "index":
        return base
    if p.endswith("/index"):
        p = p[: -len("/index")]
    return f"{base}{p}/"


def page(meta: dict, body: str) -> str:
    lines = [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in meta.items()]
    return "---\n" + "\n".join(lines) + "\n---\n\n" + body


# -- fastapi ---------------------------------------------------------------------------------------

FASTAPI_SKIP = {"release-notes.md", "_llm-test.md", "translation-banner.md", "fastapi-people.md"}
FASTAPI_TOP = {
    "learn": {
        "python-types.md",
        "async.md",
        "virtual-environments.md",
        "environment-variables.md",
        "fastapi-cli.md",
        "editor-support.md",
    },
    "overview": {"index.md", "features.md"},
    "about": {"alternatives.md", "history-design-future.md", "benchmarks.md", "management.md"},
}


def fastapi_intent(rel: str) -> str:
    parts = rel.split("/")
    if len(parts) == 1:
        return next((i for i, names in FASTAPI_TOP.items() if rel in names), "resources")
    top = parts[0]
    if top == "tutorial":
        if parts[1] == "dependencies":
            return "dependencies"
        return "security" if parts[1] == "security" else "tutorial"
    if top == "advanced":
        return "security" if parts[1] == "security" else "advanced"
    return {"learn": "learn", "about": "about", "resources": "resources"}.get(top, top)


def fastapi(repo: Repo):
    prefix = "docs/en/docs/"
    for f in repo.files(prefix):
        rel = f[len(prefix) :]
        if not rel.endswith(".md") or rel in FASTAPI_SKIP or rel.startswith("reference/"):
            continue
        _, body = split_front(repo.show(f))
        title = re.sub(r"\s*\{\s*#[^}]*\}\s*$", "", first_heading(body)).replace("`", "")
        url = directory_url("https://fastapi.tiangolo.com/", rel)
        yield rel, page({"title": title, "intent": fastapi_intent(rel), "url": url}, body)


# -- traefik ---------------------------------------------------------------------------------------

TRAEFIK_INTENTS = [
    ("reference/install-configuration/providers/", "install-providers"),
    ("reference/install-configuration/", "install-configuration"),
    ("reference/routing-configuration/http/middlewares/", "http-middlewares"),
    ("reference/routing-configuration/tcp/middlewares/", "http-middlewares"),
    ("reference/routing-configuration/kubernetes/", "kubernetes-routing"),
    ("reference/routing-configuration/other-providers/", "provider-routing"),
    ("reference/routing-configuration/", "routing-configuration"),
    ("security/", "security"),
    ("migrate/", "migrate"),
    ("deprecation/", "migrate"),
    ("index.md", "getting-started"),
    ("features/", "getting-started"),
    ("getting-started/", "getting-started"),
    ("setup/", "setup"),
    ("expose/", "expose"),
    ("secure/", "secure"),
    ("govern/", "secure"),
    ("observe/", "observe"),
    ("extend/", "extend"),
    ("contributing/", "contributing"),
]
TRAEFIK_SKIP = {
    "reference/static-configuration/cli-ref.md",
    "reference/static-configuration/env-ref.md",
}


def traefik(repo: Repo):
    prefix = "docs/content/"
    for f in repo.files(prefix):
        rel = f[len(prefix) :]
        name = rel.rsplit("/", 1)[-1]
        if not rel.endswith(".md") or rel in TRAEFIK_SKIP:
            continue
        if name.startswith("include-") or rel.startswith("includes/"):
            continue
        meta, body = split_front(repo.show(f))
        body = body.lstrip("\n")
        title = str(meta.get("title") or first_heading(body))
        intent = next((i for p, i in TRAEFIK_INTENTS if rel.startswith(p)), None)
        if intent is None:
            raise ValueError(f"traefik: no intent for {rel}")
        url = directory_url("https://doc.traefik.io/traefik/", rel)
        yield rel, page({"title": title, "intent": intent, "url": url}, body)


# -- duckdb ----------------------------------------------------------------------------------------

DUCKDB_SKIP = {
    "clients/c/api.md",
    "clients/python/reference/index.md",
    "guides/database_integration/overview.md",
    "guides/file_formats/overview.md",
    "guides/network_cloud_storage/overview.md",
    "sql/statements/overview.md",
}


def duckdb(repo: Repo):
    prefix = "docs/stable/"
    for f in repo.files(prefix):
        rel = f[len(prefix) :]
        if not rel.endswith(".md") or rel in DUCKDB_SKIP:
            continue
        meta, body = split_front(repo.show(f))
        title = str(meta.get("title", "")).strip().strip("'\"")
        intent = {"index.md": "getting_started", "lakehouse_formats.md": "lakehouse_formats"}.get(
            rel, rel.split("/")[0]
        )
        url = "https://duckdb.org/docs/stable/" + ("" if rel == "index.md" else rel[: -len(".md")])
        yield rel, page({"title": title, "intent": intent, "url": url}, body)


# -- chezmoi (the script in its SOURCE.md, as a function) ------------------------------------------

CHEZMOI = "assets/chezmoi.io/"
SNIP_RX = re.compile(r'^(\s*)--8<-- "([^":]+)(?::([\w-]+))?"\s*$')
MARK_RX = re.compile(r"^\s*--8<-- \[(start|end):([\w-]+)\]\s*$")
CHEZMOI_DIRS = {
    "tools": "tools",
    "password-managers": "password-managers",
    "encryption": "encryption",
    "machines": "machines",
    "advanced": "advanced",
    "frequently-asked-questions": "faq",
}


def chezmoi_intent(rel: str) -> str:
    parts = rel.split("/")
    if len(parts) == 1:
        return "getting-started"
    if parts[0] == "developer-guide":
        return "developer-guide"
    if parts[0] == "user-guide":
        return "user-guide" if len(parts) == 2 else CHEZMOI_DIRS[parts[1]]
    if parts[0] == "reference":
        if len(parts) == 2:
            return "reference"
        sub = parts[1]
        if sub == "configuration-file":
            return "configuration-file"
        if sub in ("special-files", "special-directories"):
            return "special-files"
        if sub in ("commands", "command-line-flags"):
            return "commands"
        if sub == "templates":
            if len(parts) == 3 or parts[2] in ("functions", "init-functions", "github-functions"):
                return "templates"
            return "secret-functions"
    raise ValueError(rel)


def chezmoi_variables(repo: Repo) -> str:
    data = yaml.safe_load(
        repo.show(CHEZMOI + "docs/reference/configuration-file/variables.md.yaml")
    )
    out = ["# Variables", ""]
    for sname in sorted(data["sections"]):
        variables = data["sections"][sname]
        out += [f"## `{sname}`" if sname else "## Top level", ""]
        for vname in sorted(variables):
            v = variables[vname]
            if not sname:
                title = vname
            elif "`" in vname:
                title = f"`{sname}.`{vname}"
            else:
                title = f"`{sname}.{vname}`"
            dflt = v.get("default") or ("`false`" if v.get("type") == "bool" else "*none*")
            out += [
                f"### {title}{' (deprecated)' if v.get('deprecated') else ''}",
                "",
                "| Type | Default |",
                "| - | - |",
                f"| `{v.get('type') or 'string'}` | {dflt} |",
                "",
                str(v.get("description", "")).rstrip(),
                "",
            ]
    return "\n".join(out) + "\n"


def chezmoi_snippet(repo: Repo, path: str, section: str | None) -> list[str]:
    lines = repo.show(CHEZMOI + "snippets/" + path).splitlines()
    lines = [x for x in lines if not x.strip().startswith("<!-- markdownlint")]
    if section:
        out, inside = [], False
        for line in lines:
            m = MARK_RX.match(line)
            if m and m.group(2) == section:
                inside = m.group(1) == "start"
                continue
            if inside:
                out.append(line)
        lines = out
    return [line for line in lines if not MARK_RX.match(line)]


def chezmoi_inline(repo: Repo, body: str) -> str:
    out = []
    for line in body.splitlines():
        m = SNIP_RX.match(line)
        if not m:
            out.append(line)
            continue
        indent, path, section = m.groups()
        out += [indent + s if s.strip() else "" for s in chezmoi_snippet(repo, path, section)]
    return "\n".join(out) + "\n"


def chezmoi(repo: Repo):
    prefix = CHEZMOI + "docs/"
    for f in repo.files(prefix):
        rel = f[len(prefix) :]
        if rel.startswith("links/") or rel in {"license.md", "reference/release-history.md.tmpl"}:
            continue
        if rel.endswith(".md.tmpl"):
            if rel == "reference/configuration-file/variables.md.tmpl":
                body = chezmoi_variables(repo)
            else:
                lines = repo.show(f).splitlines(keepends=True)
                body = "".join(
                    x for x in lines if not re.match(r"^\{\{- \$\w+ := .* -\}\}$", x.strip())
                )
            rel = rel[: -len(".tmpl")]
        elif rel.endswith(".md"):
            body = repo.show(f)
        else:
            continue
        body = chezmoi_inline(repo, body)
        meta = {
            "title": first_heading(body),
            "intent": chezmoi_intent(rel),
            "url": directory_url("https://chezmoi.io/", rel),
        }
        yield rel, page(meta, body)


# -- uv --------------------------------------------------------------------------------------------

UV_INTENTS = [
    ("concepts/projects/", "projects"),
    ("concepts/authentication/", "authentication"),
    ("concepts/", "concepts"),
    ("guides/integration/", "integrations"),
    ("guides/migration/", "migration"),
    ("guides/", "guides"),
    ("getting-started/", "getting-started"),
    ("index.md", "getting-started"),
    ("pip/", "pip-interface"),
    ("reference/", "reference"),
]


def markdown_pages(repo: Repo, prefix: str):
    """(path under `prefix`, front matter, body) of every markdown file under `prefix`."""
    for f in repo.files(prefix):
        rel = f[len(prefix) :]
        if rel.endswith(".md"):
            meta, body = split_front(repo.show(f))
            yield rel, meta, body.lstrip("\n")


def uv(repo: Repo):
    for rel, meta, body in markdown_pages(repo, "docs/"):
        title = str(meta.get("title") or first_heading(body)).replace("`", "")
        intent = next((i for p, i in UV_INTENTS if rel.startswith(p) or rel == p), None)
        if intent is None:
            raise ValueError(f"uv: no intent for {rel}")
        url = directory_url("https://docs.astral.sh/uv/", rel)
        yield rel, page({"title": title, "intent": intent, "url": url}, body)


# -- mise ------------------------------------------------------------------------------------------

MISE_INTENTS = [
    ("cli/", "cli"),
    ("configuration", "configuration"),
    ("dev-tools/backends/", "backends"),
    ("dev-tools/", "dev-tools"),
    ("lang/", "languages"),
    ("tasks/", "tasks"),
    ("environments/", "environments"),
    ("bootstrap", "bootstrap"),
    ("mise-cookbook/", "cookbook"),
    ("registry.md", "dev-tools"),
]
# the top-level pages about using and writing plugins
MISE_PLUGINS = re.compile(r"^[^/]*plugin[^/]*\.md$")
SETTINGS_TAG = re.compile(r"^<Settings[^>]*/>\s*$", re.M)


def mise_settings(repo: Repo) -> str:
    """What docs/components/settings.vue renders from settings.toml: a heading a setting, then its
    type, environment variable, default and docs (else its description)."""
    out: list[str] = []

    def walk(table: dict, prefix: str) -> None:
        for key, value in table.items():
            name = f"{prefix}{key}"
            if not isinstance(value, dict):
                continue
            if "type" not in value:
                walk(value, name + ".")
                continue
            optional = " (optional)" if value.get("optional") else ""
            facts = [f"- Type: `{value['type']}`{optional}"]
            if value.get("env"):
                facts.append(f"- Env: `{value['env']}`")
            default = value.get("default_docs", value.get("default"))
            if default is not None:
                shown = default if isinstance(default, str) else json.dumps(default)
                facts.append(f"- Default: `{shown}`")
            if value.get("deprecated"):
                facts.append(f"- Deprecated: {value['deprecated']}")
            text = str(value.get("docs") or value.get("description") or "").strip()
            out.append(f"## `{name}`\n\n" + "\n".join(facts) + ("\n\n" + text if text else ""))

    walk(tomllib.loads(repo.show("settings.toml")), "")
    return "\n\n".join(out) + "\n"


def mise(repo: Repo):
    for rel, meta, body in markdown_pages(repo, "docs/"):
        if rel == "configuration/settings.md":
            body = SETTINGS_TAG.sub(lambda _: mise_settings(repo), body)
        title = str(meta.get("title") or first_heading(body)).replace("`", "")
        if MISE_PLUGINS.search(rel):
            intent = "plugins"
        else:
            intent = next((i for p, i in MISE_INTENTS if rel.startswith(p)), "general")
        url = "https://mise.jdx.dev/" + ("" if rel == "index.md" else rel[: -len(".md")] + ".html")
        yield rel, page({"title": title, "intent": intent, "url": url}, body)


SETS = {
    "fastapi": fastapi,
    "traefik": traefik,
    "duckdb": duckdb,
    "chezmoi": chezmoi,
    "uv": uv,
    "mise": mise,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=sorted(SETS))
    ap.add_argument("--git", required=True, help="a git directory holding the set's commit")
    ap.add_argument("--out", type=Path, help="default: bench/sets/NAME/docs")
    args = ap.parse_args()
    out = args.out or HERE / args.name / "docs"
    if out.exists():
        shutil.rmtree(out)
    repo = Repo(args.git, COMMITS[args.name])
    n, size, intents = 0, 0, dict[str, int]()
    for rel, text in SETS[args.name](repo):
        meta, _ = split_front(text)
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        n, size = n + 1, size + len(text.encode())
        intents[meta["intent"]] = intents.get(meta["intent"], 0) + 1
    print(f"{args.name}: {n} pages, {size / 1e6:.2f} MB, {len(intents)} intents -> {out}")
    print("  " + ", ".join(f"{k} {v}" for k, v in sorted(intents.items())), file=sys.stderr)


if __name__ == "__main__":
    main()

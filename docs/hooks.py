"""mkdocs hooks: pages generated at build time, so they cannot drift from their sources.

- the home page is the README (its `docs/...` links made relative to the site);
- the config reference comes from the config dataclasses, by the same code as
  `scripts/train.py --help_config`;
- the plots under `benchmarks/results/` are served as `results/img/...`, so the results pages
  show the files the benchmarks wrote, not copies of them.
"""

from __future__ import annotations

import os

CONFIG_MARKER = "<!-- config-fields -->"
README_MARKER = "<!-- readme -->"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: list[tuple[str, str, str, str, str]]) -> str:
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, kind, default, _value, note in rows:
        lines.append(f"| `{name}` | `{_cell(kind)}` | `{_cell(default)}` | {_cell(note)} |")
    return "\n".join(lines)


def config_reference() -> str:
    from jaxrl_dist.agents import REGISTRY
    from jaxrl_dist.config.describe import describe
    from jaxrl_dist.config.engine_sections import ENGINE_SECTIONS
    from jaxrl_dist.config.train import SECTIONS, TrainConfig

    parts = ["## The run (`--config.NAME=VALUE`)", _table(describe(TrainConfig, ""))]
    for name, cls in SECTIONS.items():
        owner = f"; read by `runtime={name!r}` only" if name in ENGINE_SECTIONS else ""
        heading = f"## `{name}` (`--config.{name}.NAME=VALUE`{owner})"
        parts += [heading, _table(describe(cls, f"{name}."))]
    for algorithm, entry in REGISTRY.items():
        cls = entry.config_cls
        parts += [
            f'## `algo` of `algorithm = "{algorithm}"` ({cls.__name__})',
            _table(describe(cls, "algo.")),
        ]
    return "\n\n".join(parts)


def readme() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read().replace("](docs/", "](")


def on_files(files, config):
    from mkdocs.structure.files import File

    results = os.path.join(ROOT, "benchmarks", "results")
    for folder, _, names in os.walk(results):
        for name in sorted(n for n in names if n.endswith(".png")):
            path = os.path.join(folder, name)
            uri = "results/img/" + os.path.relpath(path, results).replace(os.sep, "/")
            files.append(File.generated(config, uri, abs_src_path=path))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, config_reference())
    if README_MARKER in markdown:
        markdown = markdown.replace(README_MARKER, readme())
    return markdown

"""The one jinja2 environment of wanbench's HTML pages: the plot report and compare's report
are templates in templates/, escaped alike."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).with_name("templates")),
                        autoescape=select_autoescape(["j2"]), trim_blocks=True)

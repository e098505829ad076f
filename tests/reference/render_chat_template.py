#!/usr/bin/env python3
"""Renders chat templates as Hugging Face's apply_chat_template does, for grove's reference test.

transformers compiles a template in jinja2's ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, the loopcontrols extension and a `generation` tag that renders its body; it
replaces the tojson filter by json.dumps(ensure_ascii=False, ...) and adds the globals
raise_exception and strftime_now. This script sets up the same environment (python3 and
python3-jinja2 only, no transformers) and renders a batch of jobs:

  render_chat_template.py JOBS.json RESULTS.json

JOBS.json is a list of {"template": PATH, "messages": [...], "tools": [...] or null,
"add_generation_prompt": bool, "bos_token": str, "eos_token": str, "extra": {...},
"now": "YYYY-MM-DDTHH:MM:SS"}; RESULTS.json gets, per job, {"text": ...} or
{"raised": "ExceptionType: message"}. The clock strftime_now reads is fixed by "now" so that
both sides render the same date. A job may give the template's text as "source" instead of a
path, and "environment": {"trim_blocks": bool, "lstrip_blocks": bool,
"keep_trailing_newline": bool} to change those settings (jinja_reference_test's constructs).
"""
import datetime
import json
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: transformers marks assistant text; renders it."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def make_environment(now, settings):
    options = {"trim_blocks": True, "lstrip_blocks": True, **settings}
    env = ImmutableSandboxedEnvironment(extensions=[GenerationTag, loopcontrols], **options)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


def render(job, cache):
    now = datetime.datetime.fromisoformat(job.get("now", "2024-07-26T12:00:00"))
    settings = job.get("environment", {})
    key = (job.get("template"), job.get("source"), job.get("now"), json.dumps(settings))
    if key not in cache:
        source = job.get("source")
        if source is None:
            with open(job["template"], encoding="utf-8") as f:
                source = f.read()
        try:
            cache[key] = make_environment(now, settings).from_string(source)
        except Exception as e:  # a template Jinja2 itself cannot parse
            cache[key] = e
    template = cache[key]
    if isinstance(template, Exception):
        return {"raised": f"{type(template).__name__}: {template}"}
    try:
        text = template.render(messages=job.get("messages", []), tools=job.get("tools"),
                               documents=None,
                               add_generation_prompt=job.get("add_generation_prompt", False),
                               bos_token=job.get("bos_token", ""),
                               eos_token=job.get("eos_token", ""), **job.get("extra", {}))
        return {"text": text}
    except Exception as e:
        return {"raised": f"{type(e).__name__}: {e}"}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        jobs = json.load(f)
    cache = {}
    results = [render(job, cache) for job in jobs]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

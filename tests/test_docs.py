"""The API reference is complete: every name in `camel_jax.__all__` and in the `__all__` of its public namespaces
(`camel_jax.fitting`, `camel_jax.mixture`, `camel_jax.experiments`) has an entry in docs/api/*.md, and every public
callable's docstring has **Arguments** (naming exactly its parameters) and **Returns** sections."""

import inspect
import operator
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

import camel_jax as cj

# the public namespaces with an `__all__` of their own: each of their names is documented as `camel_jax.NS.NAME`
NAMESPACES = ("fitting", "mixture", "experiments")
# public namespaces with an `__all__` kept off the top level's (`from camel_jax.solver import minimise`)
OWN_PAGE = ("solver",)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "api"
# a list item naming parameters: "- `name`: ..." or "- `low`, `high`: ..."
ITEM = re.compile(r"^\s*- ((?:`\w+`(?:, | and | or )?)+)(?: \([^)]*\))?:", re.M)


def _entries() -> set[str]:
    text = "\n".join(p.read_text() for p in DOCS.glob("*.md"))
    return set(re.findall(r"^::: camel_jax\.([\w.]+)", text, re.M))


def _public() -> list[tuple[str, object]]:
    """Every public name, qualified below `camel_jax` ("fit", "experiments.backtest"), and its object."""
    top = [(name, getattr(cj, name)) for name in cj.__all__ if name not in NAMESPACES]
    members = [(ns, name) for ns in NAMESPACES + OWN_PAGE for name in getattr(cj, ns).__all__]
    return top + [(f"{ns}.{name}", getattr(getattr(cj, ns), name)) for ns, name in members]


def _callables() -> list[tuple[str, object]]:
    out = []
    for name, obj in _public():
        if inspect.isfunction(obj) or (callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj)):
            out.append((name, obj))
    return out


def _parameters(obj) -> list[str]:
    signature = inspect.signature(obj)
    return [
        p.name
        for p in signature.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"
    ]


def _section(doc: str, title: str) -> str:
    """The text of a `**Title**` section, up to the next bold section heading."""
    match = re.search(rf"^\*\*{title}\*\*.*?(?=^\*\*\w+\*\*|\Z)", doc, re.M | re.S)
    return match.group(0) if match else ""


def test_every_public_name_has_an_api_entry():
    entries = _entries()
    public = {name for name, obj in _public() if not inspect.ismodule(obj)}
    # a namespace without an `__all__` (simulate): entries of its members
    namespaces = {name for name, obj in _public() if inspect.ismodule(obj)} | {"plot"}
    missing = sorted(public - entries) + sorted(namespaces - {e.split(".")[0] for e in entries})
    assert not missing, f"no `::: camel_jax.NAME` entry in docs/api/*.md for {missing}"
    unknown = sorted(e for e in entries if e not in public and e.split(".")[0] not in namespaces)
    assert not unknown, f"docs/api/*.md documents names camel_jax does not export: {unknown}"


def test_all_is_the_public_surface():
    assert len(cj.__all__) == len(set(cj.__all__))
    assert all(hasattr(cj, name) for name in cj.__all__)
    public = {n for n in vars(cj) if not n.startswith("_") and not inspect.ismodule(getattr(cj, n))}
    assert sorted(public - set(cj.__all__)) == [], "exported but not in __all__"
    for ns in NAMESPACES:
        module = getattr(cj, ns)
        assert ns in cj.__all__ and len(module.__all__) == len(set(module.__all__))
        assert set(module.__all__) == {n for n in vars(module) if not n.startswith("_") and not inspect.ismodule(
            getattr(module, n))}, f"camel_jax.{ns}: exported but not in __all__, or in __all__ but absent"


def test_the_top_level_is_one_page_a_user_can_hold_in_mind():
    """Issue 58: the core at the top (at most 50 names); the building blocks and experiment tools in namespaces."""
    assert len(cj.__all__) <= 50
    core = {"fit", "bootstrap", "calibrate", "fit_pipeline", "optimal_mixture", "decide", "next_runs", "influence",
            "save", "load", "MixtureData", "CAMEL", "availability_caps", "export_mixture", "read_mixture"}  # fmt: skip
    assert core <= set(cj.__all__)
    assert {"backtest", "select_law", "spearman", "OBSERVED_COLUMNS", "DMLNested"} <= set(cj.experiments.__all__)
    assert not set(cj.__all__) & {n for ns in NAMESPACES for n in getattr(cj, ns).__all__}


def test_plot_is_an_attribute_imported_on_first_use():
    """`import camel_jax` leaves matplotlib alone (it is optional); `cj.plot` imports the figures on first use."""
    import subprocess
    import sys

    pytest.importorskip("matplotlib")
    code = "import sys, camel_jax as cj; assert 'matplotlib' not in sys.modules; print(cj.plot.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "camel_jax.plot"


@pytest.mark.parametrize("name, obj", _callables(), ids=[n for n, _ in _callables()])
def test_docstring_documents_every_parameter(name, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc and not doc.startswith(("Arguments as", "Like ")), f"{name} has no docstring of its own"
    arguments, returns = _section(doc, "Arguments"), _section(doc, "Returns")
    assert returns, f"{name}: no **Returns** section"
    parameters = _parameters(obj)
    if parameters:
        assert arguments, f"{name}: no **Arguments** section"
    named = {n for group in ITEM.findall(arguments) for n in re.findall(r"`(\w+)`", group)}
    missing = [p for p in parameters if f"`{p}`" not in arguments]
    assert not missing, f"{name}: **Arguments** does not document {missing}"
    unknown = sorted(named - set(inspect.signature(obj).parameters))  # `**ascent` may be documented
    assert not unknown, f"{name}: **Arguments** documents {unknown}, which are not parameters"


def _mutable(value) -> bool:
    """Whether a caller could change the constant in place (nested mappings and sequences included)."""
    if isinstance(value, (dict, list, set, bytearray)):
        return True
    if isinstance(value, np.ndarray):
        return bool(value.flags.writeable)
    if isinstance(value, Mapping):
        return any(_mutable(v) for v in value.values())
    if isinstance(value, tuple):
        return any(_mutable(v) for v in value)
    return False


def test_exported_constants_are_read_only():
    constants = {f"cj.{n}": obj for n, obj in _public() if n.split(".")[-1].isupper() and not inspect.isclass(obj)}
    constants |= {f"simulate.{n}": getattr(cj.simulate, n) for n in dir(cj.simulate) if n.isupper()}
    assert {"cj.BENCHMARK_WEIGHTS", "cj.experiments.ADAPTIVE", "simulate.SPECIALIZATION"} <= set(constants)
    assert [name for name, value in constants.items() if _mutable(value)] == []
    with pytest.raises(TypeError):
        operator.setitem(cj.BENCHMARK_WEIGHTS["balanced"], "mmlu", 1.0)


def test_fit_arrays_is_a_plain_function_with_its_own_docstring():
    import pydoc

    assert inspect.isfunction(cj.fit_arrays) and "restarts" in inspect.signature(cj.fit_arrays).parameters
    page = pydoc.render_doc(cj.fit_arrays)
    assert "_JitWrapper" not in page and "**Returns**" in page


# a bold section heading ("**Arguments**:", "**Returns** (as `fit`'s):") and, on the next line, a list item:
# python-markdown starts a list only after a blank line, so mkdocs renders the list as one run-on paragraph
HEADING_THEN_ITEM = re.compile(r"^[ \t]*\*\*\w[\w ]*\*\*[^\n]*\n[ \t]*- ", re.M)


def _documented() -> list[tuple[str, object]]:
    """Every public object the API pages render: the public names, and the methods and properties of the classes."""
    out = []
    for name, obj in _public():
        if inspect.ismodule(obj):
            continue
        out.append((name, obj))
        if inspect.isclass(obj):
            for attribute, member in vars(obj).items():
                if not attribute.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    out.append((f"{name}.{attribute}", member))
    return out


def test_a_section_heading_is_followed_by_a_blank_line_before_its_list():
    bad = [name for name, obj in _documented() if HEADING_THEN_ITEM.search(inspect.getdoc(obj) or "")]
    assert bad == [], f"a **Section** heading directly followed by a `- ` item (add a blank line) in {bad}"


def test_the_check_sees_a_heading_followed_by_a_list_item():
    assert HEADING_THEN_ITEM.search("Fit.\n\n**Arguments**:\n- `law`: the law.\n")
    assert HEADING_THEN_ITEM.search("**Arguments** (as `fit`'s):\n    - `law`: the law.\n")
    assert not HEADING_THEN_ITEM.search("Fit.\n\n**Arguments**:\n\n- `law`: the law.\n")


SITE = Path(__file__).resolve().parents[1] / "build" / "site"
# a list rendered as a paragraph: "<p><strong>Arguments</strong>:\n- <code>law</code>: ... - <code>y</code>: ..."
RUN_ON = re.compile(r"(?:^|\s)- <code>\w+</code>(?:, <code>\w+</code>)*:")


def _run_on_paragraphs(html: str) -> list[str]:
    paragraphs = re.findall(r"<p>(.*?)</p>", html, re.S)
    return [p[:120] for p in paragraphs if RUN_ON.search(p)]


def test_the_built_api_pages_render_arguments_as_lists():
    """On the site `make test` builds first (`make docs`): no API page holds a list rendered as one paragraph."""
    pages = sorted((SITE / "api").glob("*/index.html"))
    if not pages:
        pytest.skip(f"no built site at {SITE} (make docs builds it)")
    bad = {page.parent.name: found for page in pages if (found := _run_on_paragraphs(page.read_text()))}
    assert bad == {}, f"lists rendered as run-on paragraphs: {bad}"


def test_the_html_check_sees_a_run_on_list():
    run_on = "<p><strong>Arguments</strong>:\n- <code>law</code>: the law. - <code>y</code>: targets.</p>"
    listed = "<p><strong>Arguments</strong>:</p>\n<ul>\n<li><code>law</code>: the law.</li>\n</ul>"
    assert _run_on_paragraphs(run_on) and not _run_on_paragraphs(listed)


def test_code_examples_fit_the_column_and_getting_started_fits_two_screens():
    """No horizontal scroll on the site: every line of a code block in docs/*.md is at most 88 characters."""
    wide = []
    for page in sorted(DOCS.parent.rglob("*.md")):
        inside = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("```"):
                inside = not inside
            elif inside and len(line) > 88:
                wide.append(f"{page.relative_to(DOCS.parent)}:{number} ({len(line)})")
    assert wide == [], f"code lines over 88 characters: {wide}"
    assert len((DOCS.parent / "index.md").read_text().splitlines()) <= 70

"""Each flag is declared once: on the field of the request it fills, or on the plugin that adds
it (launcher/flags.py). cli/declare.py is the only place a click parameter is made from them,
every command's parameters are its declarations, and no launcher command line is spelt out by
hand elsewhere (argv_of gives a request's words back)."""

from __future__ import annotations

import ast
from pathlib import Path

import click

from launcher.cli.main import app
from tests.conftest import ROOT

MAKERS = {"option", "Option", "argument", "Argument"}  # click's parameter makers
BUILDERS = {ROOT / "launcher/cli/declare.py", ROOT / "launcher/cli/main.py"}  # main: --version


def _click_params_made(path: Path) -> list[str]:
    """`click.option(...)`-style calls and typer imports in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MAKERS and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in ("click", "typer"):
            found.append(f"{path.name}:{node.lineno}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n == "typer" or n.startswith("typer.") for n in names):
                found.append(f"{path.name}:{node.lineno}: typer")
    return found


def test_only_the_builder_makes_click_parameters():
    made = [hit for p in sorted((ROOT / "launcher").rglob("*.py")) if p not in BUILDERS
            for hit in _click_params_made(p)]
    assert made == []


def test_the_maker_check_can_fail(tmp_path):
    twice = tmp_path / "twice.py"
    twice.write_text("import click\nimport typer\n@click.option('--profile')\ndef f(): pass\n")
    assert sorted(_click_params_made(twice)) == ["twice.py:2: typer", "twice.py:3"]


def _commands(group: click.Group, path: str = "launcher") -> list[tuple[str, click.Command]]:
    out = []
    for name in group.list_commands(click.Context(group)):
        cmd = group.get_command(click.Context(group), name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{path} {name}")
        else:
            out.append((f"{path} {name}", cmd))
    return out


def _spellings(cmd: click.Command) -> list[str]:
    return [o for p in cmd.get_params(click.Context(cmd)) for o in (*p.opts, *p.secondary_opts)
            if o.startswith("-")]


def test_no_command_declares_a_flag_twice():
    """click takes a second `--profile` on one command silently; here it fails."""
    seen = _commands(app)
    assert len(seen) >= 17
    for name, cmd in seen:
        spelt = _spellings(cmd)
        assert len(spelt) == len(set(spelt)), (name, sorted(x for x in spelt
                                                           if spelt.count(x) > 1))


def test_every_parameter_fills_a_request_field_or_the_command_s_own():
    """What click parses goes into the request by the same name: no copy between."""
    import dataclasses

    from launcher.flags import FLAG, plugin_group
    from launcher.usecases.names import plugin_flags

    checked = 0
    for name, cmd in _commands(app):
        handler = cmd.callback
        cells = {c: v.cell_contents for c, v in zip(handler.__code__.co_freevars,
                                                      handler.__closure__ or (), strict=True)}
        request = cells.get("request")
        if request is None:
            continue
        fields = {f.name for f in dataclasses.fields(request) if FLAG in f.metadata}
        own = {d.dest for d in cells["own"]}
        bag = plugin_group(request)
        plugins = {dest for _, dest, _ in plugin_flags(*bag[1:])} if bag else set()
        parsed = {p.name for p in cmd.get_params(click.Context(cmd))} - {"_click_default_help"}
        assert parsed == fields | own | plugins, name
        checked += 1
    assert checked >= 13


def _launcher_argv_spelt(path: Path) -> list[str]:
    """A list or tuple literal that starts `"launcher", ...` and spells a `--flag` itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.List | ast.Tuple) and node.elts \
                and isinstance(node.elts[0], ast.Constant) and node.elts[0].value == "launcher" \
                and any(isinstance(e, ast.Constant) and isinstance(e.value, str)
                        and e.value.startswith("--") and e.value not in ("--", "--help")
                        for e in node.elts):
            found.append(f"{path.name}:{node.lineno}")
        if isinstance(node, ast.Dict) and sum(
                isinstance(k, ast.Constant) and isinstance(k.value, str)
                and k.value.startswith("--") for k in node.keys) >= 2:
            found.append(f"{path.name}:{node.lineno}: a table of flags")
    return found


def test_no_launcher_command_line_is_spelt_by_hand():
    spelt = [hit for p in sorted((ROOT / "launcher").rglob("*.py"))
             for hit in _launcher_argv_spelt(p)]
    assert spelt == []


def test_the_spelling_check_can_fail(tmp_path):
    hand = tmp_path / "hand.py"
    hand.write_text("a = ['launcher', 'plan', '--profile', p]\n"
                    "b = {'--profile': p, '--gpus': g}\n")
    assert _launcher_argv_spelt(hand) == ["hand.py:1", "hand.py:2: a table of flags"]

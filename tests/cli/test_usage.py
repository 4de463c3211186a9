"""Mistakes on the command line: one line, exit code 2, never a traceback; help that reads well."""

import json
import subprocess
import sys

import pytest

from tracesleuth import __version__
from tracesleuth.cli import main

SPANS_CSV = ("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns\n"
             "a1,01,,web,home,100,200\n"
             "a1,02,01,db,q,110,120\n"
             "a1,03,01,db,q,130,150\n"
             "a2,04,,web,home,300,380\n"
             "a2,05,04,db,q,310,320\n")


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ") and "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.mark.parametrize("argv, says", [
    (["--endpont", "x"], ["--endpont", "--endpoint", "'table'", "tracesleuth --help"]),
    (["info", "--endpont", "x"], ["--endpont", "'tracesleuth info' has no such option", "--endpoint"]),
    (["table", "x", "--endpont", "y"], ["--endpont", "did you mean --endpoint?", "tracesleuth table --help"]),
    (["pattern"], ["'pattern'", "'patterns'"]),
    (["patterns", "x", "--seed", "abc"], ["--seed", "integer", "'abc'", "tracesleuth patterns --help"]),
    (["evaluate", "patterns", "--sessions", "many"], ["--sessions", "'many'"]),
    (["info"], ["Missing argument", "PATH..."]),
    (["table", "x", "-e"], ["-e", "requires an argument"]),
])
def test_usage_mistakes_are_one_line_and_exit_2(argv, says, capsys):
    assert main(argv) == 2
    line = one_error_line(capsys)
    for word in says:
        assert word in line, line


def test_usage_mistake_with_json_is_one_json_document(capsys):
    assert main(["info", "--endpont", "x", "--json"]) == 2
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["type"] == "UsageError" and "--endpont" in doc["error"] and "\n" not in doc["error"]
    assert captured.err == ""


def test_missing_path_is_named(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    assert main(["info", str(missing)]) == 2
    assert str(missing) in one_error_line(capsys)


def test_a_value_after_a_flag_is_told_to_be_no_value(tmp_path, capsys):
    f = tmp_path / "spans.csv"
    f.write_text(SPANS_CSV)
    assert main(["info", str(f), "--json", "true"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert "--json takes no value" in doc["error"] and "'true'" in doc["error"]
    assert main(["table", str(f), "--noised", "false"]) == 2  # not an option of table: a usage error
    one_error_line(capsys)


def test_help_version_and_no_arguments(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tracesleuth {__version__}"
    assert main(["-h"]) == 0
    assert "ingest" in capsys.readouterr().out
    assert main([]) == 0
    captured = capsys.readouterr()
    assert "Usage" in captured.out and "Traceback" not in captured.err
    assert main(["evaluate"]) == 0
    assert "patterns" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["info"], ["ingest"], ["table"], ["patterns"], ["analyze"],
                                     ["collect"], ["demo"], ["evaluate", "patterns"], []])
def test_help_has_no_type_artefacts(command, capsys):
    assert main([*command, "-h"]) == 0
    text = capsys.readouterr().out
    assert "Usage" in text
    for artefact in ("<bool>", "<str>", "<int>", "<list", "{paths}", "{PATH"):
        assert artefact not in text, (artefact, text)
    if command in (["info"], ["table"], ["patterns"], ["analyze"], ["ingest"]):
        assert "PATH..." in text


def test_ingest_of_a_missing_path_creates_no_store(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["ingest", str(tmp_path / "nope.csv"), "-o", str(store)]) == 2
    assert "nope.csv" in one_error_line(capsys)
    assert not store.exists()


def test_table_headers_name_operations_in_ms(tmp_path, capsys):
    f = tmp_path / "spans.csv"
    f.write_text(SPANS_CSV)
    assert main(["table", str(f)]) == 0
    text = capsys.readouterr().out
    assert "exclusive ms: db:q" in text and "latency ms" in text
    assert "exclusive_ns" not in text


def test_info_error_rate_unknown_and_requests_not_calls(tmp_path, capsys):
    f = tmp_path / "spans.csv"
    f.write_text(SPANS_CSV)  # no status column
    assert main(["info", str(f), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["endpoints"][0]["error_rate"] is None
    inner = {r["endpoint"]: r for r in doc["entry_operations"]}["db:q"]
    assert inner["requests"] == 2 and inner["calls"] == 3 and inner["error_rate"] is None
    assert main(["info", str(f)]) == 0
    assert "unknown" in capsys.readouterr().out

    g = tmp_path / "status.csv"
    g.write_text("trace_id,span_id,parent_span_id,service,operation,start_ns,end_ns,status\n"
                 "a1,01,,web,home,100,200,ok\n"
                 "a1,02,01,db,q,110,120,error\n"
                 "a1,03,01,db,q,130,150,error\n"
                 "a2,04,,web,home,300,380,unset\n"
                 "a2,05,04,db,q,310,320,unset\n")
    assert main(["info", str(g), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["endpoints"][0]["error_rate"] == 0.0
    inner = {r["endpoint"]: r for r in doc["entry_operations"]}["db:q"]
    assert inner["error_rate"] == 0.5  # one request of two had a failed call (two failed calls)


def test_usage_mistakes_as_python_dash_m(tmp_path):
    for argv in (["--endpont", "x"], ["pattern"], ["patterns", "x", "--seed", "abc"]):
        r = subprocess.run([sys.executable, "-m", "tracesleuth", *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "tracesleuth", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"tracesleuth {__version__}"
    r = subprocess.run([sys.executable, "-m", "tracesleuth"], capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr and "Usage" in r.stdout + r.stderr


@pytest.mark.parametrize("argv, option", [
    (["localize", "{f}", "--time", "1000/2000"], "--time"),
    (["patterns", "{f}", "--time", "1000/2000"], "--time"),
    (["compare", "{f}", "--baseline-time", "1000/2000", "--problem-time", "0/1"], "--baseline-time"),
])
def test_an_empty_period_names_the_period_asked_and_the_one_the_input_covers(tmp_path, capsys, argv, option):
    """Spans at 100-380 ns after the epoch; a period 1000-2000 s later holds none of them."""
    f = tmp_path / "spans.csv"
    f.write_text(SPANS_CSV)
    assert main([a.format(f=f) for a in argv]) == 2
    line = one_error_line(capsys)
    assert f"{option} 1970-01-01T00:16:40Z/1970-01-01T00:33:20Z: no trace of the input starts then" in line
    assert "it holds spans from 1970-01-01T00:00:00Z to 1970-01-01T00:00:00Z" in line


def _command_paths() -> list[str]:
    import typer

    from tracesleuth.cli.app import app

    paths = []

    def walk(command, path):
        paths.append(" ".join(path))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*path, name])
    walk(typer.main.get_command(app), [])
    return paths


def test_every_commands_help_ends_with_one_to_three_examples(capsys):
    from tracesleuth.cli._examples import EXAMPLES

    paths = _command_paths()
    assert sorted(EXAMPLES) == sorted(paths)  # no command without examples, no examples of no command
    for path in paths:
        assert main([*path.split(), "--help"]) == 0
        help_text = capsys.readouterr().out
        assert "Examples (from the repository's root" in help_text, path
        assert 1 <= len(EXAMPLES[path]) <= 3
        for example in EXAMPLES[path]:
            assert example.startswith(f"tracesleuth {path}".rstrip() + " ") or path == "", example
            assert example.split()[1] in help_text.split("Examples", 1)[1], path


def test_a_misspelled_endpoint_gets_the_closest_operation_keys(tmp_path, capsys):
    f = tmp_path / "spans.csv"
    f.write_text(SPANS_CSV)
    assert main(["table", str(f), "-e", "web:hmoe"]) == 2
    assert "did you mean web:home?" in one_error_line(capsys).lower()


@pytest.mark.parametrize("argv", [["table", "{f}"], ["paths", "{f}"], ["analyze", "{f}", "-o", "{d}/r.html"],
                                  ["localize", "{f}"], ["patterns", "{f}"], ["annotate", "derive", "{f}"]])
def test_every_command_that_analyses_one_period_takes_time(tmp_path, capsys, argv):
    """--time means one thing everywhere: only the requests whose trace starts in the period."""
    f = tmp_path / "spans.csv"
    f.write_text(SPANS_CSV)
    assert main([a.format(f=f, d=tmp_path) for a in argv] + ["--time", "1000/2000"]) == 2
    assert "--time 1970-01-01T00:16:40Z/1970-01-01T00:33:20Z: no trace of the input starts then" in one_error_line(capsys)


@pytest.mark.parametrize("owner, step", [("typer.main", "get_command"), ("typer.core.TyperGroup", "make_context"),
                                         ("typer.core.TyperGroup", "invoke")])
def test_a_signal_while_the_command_line_is_parsed_is_one_line_and_128_plus_signal(owner, step):
    """Typer turns an interrupt while it builds the commands, parses the command line or picks the
    command into a silent exit 130, SIGTERM's too: here it is 143 and one line, as inside a command."""
    code = f"""
import os, signal, sys, time, typer.core, typer.main
original = {owner}.{step}
def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    return original(*args, **kwargs)
{owner}.{step} = interrupted
from tracesleuth.cli import main
sys.exit(main(["info", "x"]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 143
    assert done.stderr == "interrupted by SIGTERM while starting: nothing done\n"


@pytest.mark.parametrize("module", ["tracesleuth._signals", "tracesleuth.cli"])
def test_ctrl_c_before_the_signal_guard_began_is_one_line_and_130(module):
    """Ctrl-C while Python imports the guard's own module (inside ``main``) or the command line
    (``python -m tracesleuth``, before ``main``): one line and 130, not a traceback (CI once sent
    it there, in a fresh virtual environment whose first run compiles every module)."""
    code = f"""
import os, runpy, signal, sys
class Stop:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            os.kill(os.getpid(), signal.SIGINT)
sys.meta_path.insert(0, Stop())
sys.argv = ["tracesleuth", "info", "x"]
runpy.run_module("tracesleuth", run_name="__main__")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (130, "interrupted by SIGINT while starting: nothing done\n")


@pytest.mark.parametrize("where, line, stored", [
    ("check_paths", "interrupted by SIGTERM before the ingest began: nothing committed\n", False),
    ("_print_ingest", "interrupted by SIGTERM after the ingest committed\n", True)])
def test_a_signal_in_ingest_outside_the_ingest_itself_says_what_the_store_holds(tmp_path, where, line, stored):
    """A signal while Typer hands ingest its arguments, or while ingest prints what it stored:
    the line says whether the ingest committed (a bare "interrupted by" told neither)."""
    (tmp_path / "spans.csv").write_text(SPANS_CSV)
    code = f"""
import os, signal, sys, time
import tracesleuth.cli.app as app
original = app.{where}
def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    return original(*args, **kwargs)
app.{where} = interrupted
from tracesleuth.cli import main
sys.exit(main(["ingest", {str(tmp_path / "spans.csv")!r}, "-o", {str(tmp_path / "store")!r}]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (143, line)
    assert (tmp_path / "store").exists() == stored

"""The docker stand-in's formats, without nodes: Go templates, docker's times and flag parsing."""

from __future__ import annotations

import json

import pytest

from sparktui.core.nodes.probes import parse_docker_ps, parse_labels
from sparktui.demo.docker import gotemplate, times
from sparktui.demo.docker.flags import Spec, parse
from sparktui.demo.docker.listing import PsRow
from sparktui.demo.docker.store import DockerError, normalize_ref


def test_templates_cover_what_sparktui_and_users_pass():
    data = {
        "State": {"Status": "exited", "ExitCode": 137, "OOMKilled": False},
        "Id": "sha256:ab",
        "Size": 12,
        "Server": {"Version": "28.3.3"},
        "Config": {"Labels": {"a.b": "x"}, "Env": ["A=1", "B=2"]},
    }
    assert gotemplate.render("{{.State.ExitCode}} {{.State.OOMKilled}}", data) == "137 false"
    assert gotemplate.render("{{.Id}} {{.Size}}", data) == "sha256:ab 12"
    assert gotemplate.render('{{index .Config.Labels "a.b"}}', data) == "x"
    assert gotemplate.render('{{join .Config.Env ","}}', data) == "A=1,B=2"
    assert gotemplate.render("{{range .Config.Env}}[{{.}}]{{end}}", data) == "[A=1][B=2]"
    assert gotemplate.render("{{if .State.OOMKilled}}oom{{else}}ok{{end}}", data) == "ok"
    assert gotemplate.render("{{.Missing}}", data) == "<no value>"
    assert json.loads(gotemplate.render("{{json .State}}", data)) == data["State"]


def test_json_escapes_like_go():
    assert gotemplate.go_json({"k": "<a&b>"}) == '{"k":"\\u003ca\\u0026b\\u003e"}'


def test_bad_template_is_an_error():
    with pytest.raises(gotemplate.TemplateError):
        gotemplate.render("{{nosuchfunc .}}", {})


def test_ps_row_label_method_and_json_feed_the_probe_parser():
    row = PsRow(
        {
            "ID": "abc",
            "Names": "c1",
            "Image": "img",
            "State": "running",
            "Status": "Up 2 minutes",
            "Labels": "sparktui.deployment=d,sparktui.rank=0",
        }
    )
    row.labels = {"sparktui.deployment": "d", "sparktui.rank": "0"}
    assert gotemplate.render('{{.Label "sparktui.rank"}}', row) == "0"
    parsed = parse_docker_ps(gotemplate.render("{{json .}}", row))
    assert parsed[0].labels == parse_labels(row["Labels"]) and parsed[0].state == "running"


def test_rfc3339_round_trip_and_since_forms():
    ns = 1_764_440_521_123_456_789
    stamp = times.rfc3339(ns)
    assert stamp.endswith("Z") and len(stamp.split(".")[1]) == 10  # nine digits and the Z
    assert times.parse_stamp(stamp) == ns
    assert times.parse_stamp("2025-11-29T18:22:01+01:00") == times.parse_stamp("2025-11-29T17:22:01Z")
    assert times.parse_since("1764440521.5") == 1_764_440_521_500_000_000
    assert times.parse_since("1m30s", now=ns) == ns - 90 * 10**9
    assert times.parse_since("yesterday") is None


@pytest.mark.parametrize(
    "seconds,text",
    [(0.2, "Less than a second"), (5, "5 seconds"), (70, "About a minute"), (600, "10 minutes"), (3 * 3600, "3 hours")],
)
def test_human_durations(seconds, text):
    assert times.human(seconds) == text


def test_flags_read_like_cobra():
    spec = Spec(
        "run",
        values={"env": ("-e", "--env"), "name": ("--name",)},
        bools={"detach": ("-d", "--detach"), "tty": ("-t",), "interactive": ("-i",)},
        interspersed=False,
    )
    opts, rest = parse(spec, ["-dit", "-eA=1", "--env", "B=2", "--name=x", "img", "cmd", "-e", "inner"])
    assert opts["env"] == ["A=1", "B=2"] and opts["name"] == ["x"]
    assert opts["detach"] == opts["tty"] == opts["interactive"] == ["true"]
    assert rest == ["img", "cmd", "-e", "inner"]  # flags after the image belong to the command
    with pytest.raises(DockerError) as e:
        parse(spec, ["--nope", "img"])
    assert e.value.code == 125 and "unknown flag: --nope" in str(e.value)


def test_image_references_normalize_as_docker_lists_them():
    assert normalize_ref("docker.io/library/ubuntu") == "ubuntu:latest"
    assert normalize_ref("nvcr.io/nvidia/vllm:25.11-py3") == "nvcr.io/nvidia/vllm:25.11-py3"
    assert normalize_ref("localhost:5000/x") == "localhost:5000/x:latest"

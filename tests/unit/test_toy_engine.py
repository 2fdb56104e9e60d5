"""An engine is one module: a toy engine defined here alone, registered for a test, is planned, has its logs
diagnosed (its milestones, its hang and hint, its failure signs) and its metrics read, with no table elsewhere
naming it."""

import shlex

import pytest

from sparktui.core import engines as registry
from sparktui.core.serving import metrics
from sparktui.core.diagnosis import phases, quickre
from sparktui.core.diagnosis.diagnose import Diagnoser, Problem, ProblemCleared
from sparktui.core.engines.base import Engine
from sparktui.core.engines.common import docker_run, make_step
from sparktui.core.engines.logsigns import Sign
from sparktui.core.diagnosis.logfile import guess_engine
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.state.states import State
from tests.unit.test_plan import IMAGE_ID, cluster, fabric_ip


class Toy(Engine):
    """Every rank runs `toy-serve` with its rank; the ranks meet at the head's --master address."""

    name, label, modes, shapes = "toy", "Toy", ("native",), {"native": "ranks"}
    default_port, default_image, package = 9300, "toy/serve:1", "toy"
    health_paths, ready_line, host_ip_env = ("/health",), "toy: serving", "TOY_HOST_IP"
    vocabulary = {"tp": "--world"}
    log_words = ("toy-serve",)
    dist_begin = quickre.compile(r"toy: joining (\d+) ranks")
    dist_end = quickre.compile(r"toy: all (\d+) ranks joined")
    signs = (
        Sign(
            "peer_lost",
            quickre.compile(r"toy: peer (\S+) is gone"),
            message="toy peer {0} left",
            hint="start that rank again",
        ),
    )
    phase_signs = {"dist_init": r"toy: joining", "weights": r"toy: reading weights"}
    hang_advice = "toy ranks meet at --master: TOY_HOST_IP must be each node's fabric address"
    hang_env = ("TOY_HOST_IP",)
    hang_advice_env_set = "TOY_HOST_IP is set everywhere: look at the path between the nodes"
    metric_series = {
        "running": "toy_running",
        "waiting": "toy_waiting",
        "kv_cache_usage": "toy_kv",
        "prompt_tokens": "toy_prompt_tokens_total",
        "generation_tokens": "toy_output_tokens_total",
        "ttft": "toy_ttft_seconds",
        "itl": "toy_itl_seconds",
    }
    metric_renamed = (("running", "2.0", "toy_busy"),)

    def node_env(self, ctx, spot):
        return {"TOY_HOST_IP": spot.ip or ""}

    def steps(self, ctx):
        return [
            make_step(
                spot.name,
                spot.rank,
                "run",
                docker_run(
                    ctx,
                    spot,
                    [
                        "toy-serve",
                        ctx.model_path,
                        "--rank",
                        str(spot.rank),
                        "--world",
                        str(len(ctx.nodes)),
                        "--master",
                        f"{ctx.head_ip}:{ctx.dist_port}",
                    ],
                ),
                f"start toy rank {spot.rank}",
                ctx.container(spot),
            )
            for spot in ctx.workers + [ctx.head]
        ]


@pytest.fixture
def toy():
    engine = registry.register(Toy())
    try:
        yield engine
    finally:
        registry.unregister("toy")


def test_the_toy_is_planned_into_its_own_docker_lines(toy):
    config, facts, subnets = cluster(2, images={"toy/serve:1": IMAGE_ID})
    plan = make_plan(config, facts, subnets, PlanOptions(engine="toy", tp=2))
    assert plan.ok, plan.errors
    assert (plan.mode, plan.image, plan.port) == ("native", "toy/serve:1", 9300)
    assert [s.description for s in plan.steps] == ["start toy rank 1", "start toy rank 0"]
    for step, rank in zip(plan.steps, (1, 0)):
        words = shlex.split(step.command)
        assert words[:3] == ["docker", "run", "-d"] and f"TOY_HOST_IP={fabric_ip(rank)}" in words
        # the command's first word is the image's entrypoint (common.docker_run)
        assert words[words.index("toy/serve:1") - 2 : words.index("toy/serve:1")] == ["--entrypoint", "toy-serve"]
        assert words[words.index("toy/serve:1") + 1 :] == [
            config.model.path,
            "--rank",
            str(rank),
            "--world",
            "2",
            "--master",
            f"{fabric_ip(0)}:{plan.dist_port}",
        ]


def test_the_toy_log_gives_its_milestones_its_hang_with_its_hint_and_ready(toy):
    d = Diagnoser("toy", hang_after=30.0)
    d.feed("toy-serve 1.0 starting", now=0.0)
    d.feed("toy: joining 2 ranks", now=1.0)
    assert d.phases.node_phase(None) == "dist_init"
    hang = [e for e in d.tick(now=40.0) if isinstance(e, Problem)]
    assert [(p.kind, p.hint) for p in hang] == [("rendezvous_hang", Toy.hang_advice)]
    assert d.state == State.HUNG
    cleared = d.feed("toy: all 2 ranks joined", now=41.0)
    assert any(isinstance(e, ProblemCleared) for e in cleared) and not d.problems
    d.feed("toy: serving on port 9300", now=42.0)
    assert [m.kind for m in d.milestones] == ["container_started", "dist_init_begin", "dist_init_end", "ready"]
    assert d.state == State.READY
    lost = d.feed("toy: peer 192.168.100.11 is gone", now=43.0)
    assert [(p.kind, p.message) for p in lost] == [("peer_lost", "toy peer 192.168.100.11 left while serving")]
    # the shared signs read its log too
    assert [p.kind for p in d.feed("torch.OutOfMemoryError: CUDA out of memory.", now=44.0)] == ["out_of_memory"]


def test_the_toy_hint_gives_way_once_the_plan_set_what_it_asks_for(toy):
    d = Diagnoser("toy", hang_after=30.0, env_set={"TOY_HOST_IP"})
    d.feed_batch(["toy-serve 1.0 starting", "nothing to see", "toy: joining 2 ranks"], None, [0.0, 0.5, 1.0])
    assert [m.kind for m in d.milestones] == ["container_started", "dist_init_begin"]  # the batch prefilter knows it
    assert [p.hint for p in d.tick(now=40.0)] == [Toy.hang_advice_env_set]


def test_the_toy_signs_are_its_own_and_leave_with_it(toy):
    other = Diagnoser(registry.DEFAULT_ENGINE)
    assert not [e for e in other.feed("toy: peer 10.0.0.2 is gone") if isinstance(e, Problem)]
    assert guess_engine("toy-serve 1.0 starting\n") == "toy"
    assert any("toy: joining" in rx.regex.pattern for _, rx in phases.phase_signs())
    with pytest.raises(ValueError, match="registered already"):
        registry.register(Toy())
    registry.unregister("toy")
    try:
        assert not any("toy:" in rx.regex.pattern for _, rx in phases.phase_signs())
        with pytest.raises(ValueError, match="unknown engine 'toy'"):
            Diagnoser("toy")
    finally:
        registry.register(toy)


PAGE = """# TYPE toy_running gauge
toy_running 3
# TYPE toy_busy gauge
toy_busy 5
# TYPE toy_waiting gauge
toy_waiting 1
# TYPE toy_kv gauge
toy_kv 0.25
# TYPE toy_prompt_tokens counter
toy_prompt_tokens_total 100
# TYPE toy_output_tokens counter
toy_output_tokens_total 40
# TYPE toy_ttft_seconds histogram
toy_ttft_seconds_bucket{le="0.1"} 1
toy_ttft_seconds_bucket{le="+Inf"} 2
toy_ttft_seconds_count 2
toy_ttft_seconds_sum 0.3
"""


def test_the_toy_metrics_are_read_by_its_series_names_per_release(toy):
    s = metrics.parse(PAGE, "toy", "2.1", at=0.0)
    assert s.error is None and s.missing == ["itl"]
    assert s.values == {
        "running": 3,
        "waiting": 1,
        "kv_cache_usage": 0.25,
        "prompt_tokens": 100,
        "generation_tokens": 40,
    }
    assert s.buckets["ttft"] == [(0.1, 1.0), (float("inf"), 2.0)]
    assert metrics.parse(PAGE, "toy", "1.5", at=0.0).values["running"] == 5  # before 2.0 the series was toy_busy
    assert toy.metric_candidates(None)["running"] == ("toy_running", "toy_busy")

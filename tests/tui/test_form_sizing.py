"""The launch form's KV cache size and context length: offered where the image's release has the flag,
greyed out (saying which release has it) where not, checked inline, followed by the preview and the fit."""

from __future__ import annotations

from textual.widgets import Button, Input, Select, Static

from sparktui.core.plan.image import ImageInfo
from sparktui.tui.app import SparkApp

from .test_form import open_form


def set_release(app, config, version: str) -> None:
    image = config.images.vllm
    app.inventory.facts[config.head.name].images[image] = ImageInfo(
        ref=image,
        node=config.head.name,
        id="sha256:" + "0" * 64,
        versions={"vllm": version, "sglang": None, "ray": "2.49.2"},
    )


def commands(form) -> str:
    return "\n".join(c for n in form.plan.nodes for c in n.commands)


async def type_into(pilot, form, key: str, text: str) -> None:
    form.query_one(f"#{key}", Input).value = text
    await pilot.pause()


async def test_a_kv_size_and_auto_length_reach_the_commands_and_the_fit(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        set_release(app, config, "0.14.1")
        form.query_one("#engine", Select).value = "vllm:ray"
        await pilot.pause()
        assert not form.query_one("#kv_cache", Input).disabled
        assert "auto" in form.query_one("#context", Input).placeholder
        fit_before = str(form.query_one("#fit", Static).content)
        await type_into(pilot, form, "kv_cache", "20G")
        await type_into(pilot, form, "context", "auto")
        assert form.parsed.options.kv_cache_bytes == 20 << 30 and form.parsed.options.max_model_len_auto
        assert "--kv-cache-memory-bytes 21474836480" in commands(form)
        assert "--max-model-len auto" in commands(form)
        assert "--kv-cache-memory-bytes" in str(form.query_one("#preview", Static).content)
        fit = str(form.query_one("#fit", Static).content)  # the fit counts the size asked, not the fraction
        assert "+ KV cache 20.0 GiB (--kv-cache-memory-bytes) = 83.8 GiB of 119.7 GiB" in fit
        assert form.plan.ok and not form.query_one("#launch", Button).disabled
        await type_into(pilot, form, "kv_cache", "")  # empty: back to the memory fraction
        assert "--kv-cache-memory-bytes" not in commands(form)
        assert str(form.query_one("#fit", Static).content) == fit_before


async def test_bad_sizes_say_so_inline_keep_the_text_and_block_launch(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        set_release(app, config, "0.14.1")
        form.query_one("#engine", Select).value = "vllm:ray"
        await pilot.pause()
        await type_into(pilot, form, "kv_cache", "twenty gigs")
        await type_into(pilot, form, "context", "-5")
        for key, words in (("kv_cache", "bytes such as 20G"), ("context", "whole number of tokens or auto")):
            err = form.query_one(f"#{key}-error", Static)
            assert err.has_class("-shown") and words in str(err.content)
        assert form.query_one("#kv_cache", Input).value == "twenty gigs"
        assert form.query_one("#context", Input).value == "-5"
        assert form.query_one("#launch", Button).disabled
        await type_into(pilot, form, "kv_cache", "0")
        assert "above 0" in str(form.query_one("#kv_cache-error", Static).content)
        await type_into(pilot, form, "kv_cache", "512M")
        await type_into(pilot, form, "context", "32768")
        assert not form.query_one("#kv_cache-error").has_class("-shown")
        assert not form.query_one("#context-error").has_class("-shown")
        assert "--kv-cache-memory-bytes 536870912" in commands(form) and "--max-model-len 32768" in commands(form)
        assert not form.query_one("#launch", Button).disabled


async def test_a_release_without_the_flags_greys_the_size_and_refuses_auto(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        set_release(app, config, "0.14.1")
        form.query_one("#engine", Select).value = "vllm:ray"
        await pilot.pause()
        await type_into(pilot, form, "kv_cache", "20G")
        set_release(app, config, "0.10.1")
        form.refresh_preview()
        await pilot.pause()
        box, note = form.query_one("#kv_cache", Input), form.query_one("#kv_cache-note", Static)
        assert box.disabled and box.value == "20G"  # greyed out, the text kept
        assert note.has_class("-shown")
        assert str(note.content) == (
            "vLLM 0.10.1 in this image has no --kv-cache-memory-bytes (it came with vLLM 0.10.2)"
        )
        assert "--kv-cache-memory-bytes" not in commands(form) and form.plan.ok
        assert "auto" not in form.query_one("#context", Input).placeholder
        await type_into(pilot, form, "context", "auto")
        err = str(form.query_one("#context-error", Static).content)
        assert "no --max-model-len auto (it came with vLLM 0.14.0)" in err
        assert form.query_one("#launch", Button).disabled
        set_release(app, config, "0.14.0")  # an image with both: the kept size applies again
        form.refresh_preview()
        await pilot.pause()
        assert not box.disabled and not note.has_class("-shown")
        assert "--kv-cache-memory-bytes 21474836480" in commands(form) and "--max-model-len auto" in commands(form)
        assert not form.query_one("#launch", Button).disabled


async def test_sglang_has_no_byte_size_and_says_so(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        form.query_one("#engine", Select).value = "sglang:native"
        await pilot.pause()
        assert form.query_one("#kv_cache", Input).disabled
        assert str(form.query_one("#kv_cache-note", Static).content) == (
            "SGLang has no flag that sizes the KV cache in bytes"
        )

"""A scenario on the reader's own input (lineage.scenario.own_input) and a trained weights file
as a scenario (lineage.scenario.weights_file): what is replaced, what is kept, what is refused
in one line, and that the made scenario loads and reads the new text."""
import pytest
import yaml

from lineage.scenario import loads
from lineage.scenario.own_input import LONG_INPUT, TAIL, NotOwnInput, reads, with_input
from lineage.scenario.weights_file import DEFAULT_TEXT, weights_scenario
from lineage.scenarios import DIR, resolve


def test_a_text_scenario_takes_the_readers_text_and_keeps_its_models_and_panels():
    made, title = with_input(resolve("tour"), "tour", text="Alice met Bob.")
    data, own = yaml.safe_load(made), yaml.safe_load((DIR / "tour.yaml").read_text())
    assert data["input"] == {"text": "Alice met Bob."} and title.endswith("(your text)")
    assert data["panels"] == own["panels"] and data["steps"] == own["steps"]
    assert data["weights"]["checkpoint"] == str(DIR / own["weights"]["checkpoint"])     # absolute: made elsewhere
    assert [c["step"] for c in data["captions"]] == [1] and "left out" in data["captions"][0]["text"]
    sc = loads(made, "made.yaml", None)            # no base folder: every path it names is absolute
    assert sc.input.text == "Alice met Bob." and len(sc.captions) == 1


def test_a_long_text_is_prefilled_to_its_last_tokens_and_prefill_can_be_given():
    text = "x" * (LONG_INPUT + 100)
    assert yaml.safe_load(with_input(resolve("tour"), "tour", text=text)[0])["decoding"]["prefill"] == len(text) - TAIL
    assert yaml.safe_load(with_input(resolve("tour"), "tour", text="abc")[0]).get("decoding", {}).get("prefill") is None
    assert yaml.safe_load(with_input(resolve("tour"), "tour", text="abcdef", prefill=2)[0])["decoding"]["prefill"] == 2
    with pytest.raises(NotOwnInput, match=r"^tour: --prefill 9: the input is 3 tokens$"):
        with_input(resolve("tour"), "tour", text="abc", prefill=9)


def test_a_long_documents_own_prefill_goes_with_its_own_input():
    data = yaml.safe_load(with_input(resolve("long_document"), "long_document", text="short")[0])
    assert data["input"] == {"text": "short"} and "prefill" not in data.get("decoding", {})


@pytest.mark.parametrize("name, what", [("recall", "toy memory"), ("fig3_two_facts", "toy memory"),
                                        ("fig9_memory_table", "figure")])
def test_what_reads_no_text_says_so_in_one_line(name, what):
    with pytest.raises(NotOwnInput) as e:
        with_input(resolve(name), name, text="hello")
    assert str(e.value).startswith(f"{name}: --text: its {what} reads no text") and "\n" not in str(e.value)


def test_models_trained_on_ids_take_ids_not_text():
    sc_path = resolve("lineage_compare")
    with pytest.raises(NotOwnInput, match="read token ids .* not text: give --ids"):
        with_input(sc_path, "lineage_compare", text="hello")
    data = yaml.safe_load(with_input(sc_path, "lineage_compare", ids=[11, 200, 11])[0])
    assert data["input"] == {"ids": [11, 200, 11]} and len(data["models"]) == 6
    assert all(m["checkpoint"].startswith(str(DIR)) for m in data["models"])


def test_what_each_bundled_scenario_reads():
    from lineage.scenario import load
    got = {n: reads(load(resolve(n))) for n in ("tour", "long_document", "effective_attention", "recall")}
    assert got == {"tour": "text", "long_document": "text", "effective_attention": "ids", "recall": None}


def test_weights_trained_on_text_read_text_and_on_ids_refuse_it():
    text_w = str(DIR / "weights" / "k3-mini-text.safetensors")
    data = yaml.safe_load(weights_scenario(text_w, "k3-mini-text.safetensors", text="def f():"))
    assert data["model"] == {"preset": "k3-mini", "checkpoint": text_w} and data["input"] == {"text": "def f():"}
    assert {p["kind"] for p in data["panels"]} >= {"tokens", "state", "decay", "routing", "cache"}
    assert yaml.safe_load(weights_scenario(text_w, "w"))["input"] == {"text": DEFAULT_TEXT}
    mqar = str(DIR / "weights" / "tiny-kda-mqar.safetensors")
    with pytest.raises(NotOwnInput, match=r"^m: --text: tiny-kda was trained on mqar \(token ids\), not text"):
        weights_scenario(mqar, "m", text="hello")
    assert yaml.safe_load(weights_scenario(mqar, "m"))["input"]["task"]["kind"] == "mqar"
    assert yaml.safe_load(weights_scenario(mqar, "m", ids=[1, 2]))["input"] == {"ids": [1, 2]}


def test_weights_without_their_sidecar_are_one_line(tmp_path):
    lone = tmp_path / "lone.safetensors"
    lone.write_bytes((DIR / "weights" / "tiny-kda-mqar.safetensors").read_bytes())
    with pytest.raises(NotOwnInput) as e:
        weights_scenario(str(lone), "lone.safetensors")
    assert str(e.value).startswith("lone.safetensors: ") and "lone.json" in str(e.value) and "\n" not in str(e.value)

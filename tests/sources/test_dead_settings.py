"""A sampling setting that another one overrides for every prompt is a warning naming both, and the card lists
the sampling each row actually got (counts per mode, temperature and top_p), never a value no row used."""

from __future__ import annotations

import logging
from collections import Counter

import pyarrow.parquet as pq

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.sources.config import load_config

from tests.helpers.card import check_card_markdown
from tests.helpers.cli import run_cli

# The README's own example: `instant` sets a temperature that every entry of the mix replaces.
README_EXAMPLE = """\
[partitions.B4]
instant_share = 0.25
[partitions.B4.sampling]
instant = { temperature = 0.6 }
mix = [{ share = 0.5, temperature = 0.7 }, { share = 0.5, temperature = 1.0 }]
"""


def warnings_of(caplog, text: str, tmp_path) -> list[str]:
    path = tmp_path / "partitions.toml"
    path.write_text(text)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kimi_eagle_data"):
        load_config(path)
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_override_every_mix_entry_replaces_is_a_warning_naming_both(caplog, tmp_path):
    lines = warnings_of(caplog, README_EXAMPLE, tmp_path)
    assert len(lines) == 1, lines
    assert "partitions.B4.sampling.instant.temperature = 0.6 is never used" in lines[0]
    assert "every entry of partitions.B4.sampling.mix sets temperature (0.7, 1)" in lines[0]
    assert str(tmp_path / "partitions.toml") in lines[0]


def test_a_mode_no_prompt_is_drawn_in_is_a_warning(caplog, tmp_path):
    lines = warnings_of(caplog, "[partitions.B6.sampling]\ninstant = { top_p = 0.8 }\n", tmp_path)
    assert lines == [f"{tmp_path / 'partitions.toml'}: partitions.B6.sampling.instant.top_p = 0.8 is never used: "
                     "partitions.B6.instant_share = 0 draws no prompt in instant mode"]
    lines = warnings_of(caplog, "[partitions.B6]\ninstant_share = 1.0\n[partitions.B6.sampling]\n"
                                "thinking = { temperature = 0.9 }\n", tmp_path)
    assert len(lines) == 1 and "partitions.B6.sampling.thinking.temperature = 0.9 is never used" in lines[0]


def test_settings_some_prompt_gets_are_no_warning(caplog, tmp_path):
    live = ("[partitions.B4]\ninstant_share = 0.25\n[partitions.B4.sampling]\ninstant = { temperature = 0.6 }\n"
            "thinking = { top_p = 0.9 }\n"
            "mix = [{ share = 0.5, temperature = 0.7 }, { share = 0.5 }]\n")     # the second entry keeps 0.6
    assert warnings_of(caplog, live, tmp_path) == []


def test_the_card_counts_the_sampling_rows_got_and_dead_settings_are_named(tmp_path):
    """A build with the README's kind of dead setting, and a run-wide --temperature every prompt replaces: the
    warnings name each and what replaces it; the card's sampling table is the rows' own (mode, temperature,
    top_p) counts, and neither dead value appears in it or in the provenance."""
    config = tmp_path / "partitions.toml"
    config.write_text(README_EXAMPLE.replace("B4", "B6"))
    w = tmp_path / "w"
    proc = run_cli("build", "B6", "--config", str(config), "--workdir", str(w), "--profile", "tiny-kimi",
                   "--model", str(TINY_MODEL_DIR), "--samples", "--max-new-tokens", "32", "--limit", "12",
                   "--temperature", "0.55", "--no-progress")
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    dead_instant = [ln for ln in warnings if "partitions.B6.sampling.instant.temperature = 0.6 is never used" in ln]
    assert len(dead_instant) == 1 and "partitions.B6.sampling.mix" in dead_instant[0], proc.stderr
    dead_run_wide = [ln for ln in warnings if "run-wide temperature = 0.55" in ln]
    assert len(dead_run_wide) == 1 and "B6: every entry of its sampling.mix sets it" in dead_run_wide[0], proc.stderr

    rows = pq.read_table(w / "validated" / "B6.parquet").to_pylist()
    got = Counter((r["mode"], r["temperature"], r["top_p"], r["split"]) for r in rows)
    assert {t for _, t, _, _ in got} <= {0.7, 1.0}
    card = (w / "dataset" / "README.md").read_text()
    found = check_card_markdown(card, w / "dataset")
    table = next(t for t in found["tables"] if t[0].startswith("| config | mode | temperature | top_p | rows"))
    listed = {}
    for line in table[1:]:
        config_, mode, temperature, top_p, counts = (c.strip() for c in line.strip().strip("|").split("|"))
        train, rejected = (int(x) for x in counts.split(" / "))
        listed[(mode, float(temperature), float(top_p))] = (train, rejected)
        assert config_ == "B6"
    expected = {}
    for (mode, temperature, top_p, split), n in got.items():
        train, rejected = expected.get((mode, temperature, top_p), (0, 0))
        expected[(mode, temperature, top_p)] = (train + n, rejected) if split == "train" else (train, rejected + n)
    assert listed == expected
    provenance = next(ln for ln in card.splitlines() if ln.startswith("| sampling |"))
    assert "temperature=" not in provenance and "top_p=" not in provenance
    assert "0.55" not in card and "0.6 " not in " ".join(table)

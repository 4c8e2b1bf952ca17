"""`kimi-data push` and `kimi-data export` (registered at the end of cli/main.py)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from kimi_eagle_data.cli.common import PUSHES, REWRITES, console, friendly_errors, out

from kimi_eagle_data.cli.options import click_config_names
from kimi_eagle_data.wording import counted, plural
from kimi_eagle_data.run_checks import REPO_ID
from kimi_eagle_data.emit.dataset import load_local
from kimi_eagle_data.hub.publish import push_dataset, tree_summary






def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _repo_id(ctx, param, value: str) -> str:
    if value is not None and not REPO_ID.match(value):
        raise click.BadParameter(f"{value!r}: expected ORG/NAME, e.g. my-org/kimi-k2.5-eagle3-data")
    return value


@click.command()
@click.argument("path", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--repo", "repo_id", required=True, metavar="ORG/NAME", callback=_repo_id,
              help="Hub dataset repo (created if missing).")
@click.option("--private", is_flag=True, help="Create the repo private (an existing repo keeps its visibility).")
@click.option("--token-env", metavar="VAR",
              help="Environment variable holding the Hub token; it must be set (no fallback). Default: HF_TOKEN, "
                   "else huggingface_hub's stored login. The token is never printed, logged or written to a file.")
@click.option("--dry-run", is_flag=True, help="Check the tree against its manifest and show what would be pushed; "
                                              "no network.")
@friendly_errors(interrupted=PUSHES)
def push(path: Path, repo_id: str, private: bool, token_env: str | None, dry_run: bool):
    """Publish DIR (a workdir or its dataset/) to the Hub as version tag v<version>.

    \b
    The tree must match its manifest.json (sha256 of every file) and the
    manifest the card (which records the manifest's sha256). Then:
      - tag v<version> absent: upload the tree in one commit (remote files the
        tree no longer has are deleted in it) and tag that commit;
      - tag present with the same manifest: "already published", exit 0;
      - tag present with other content: refused (published versions are
        immutable): bump --dataset-version and re-emit.
    The card is part of the hashed content and is pushed as emitted: run
    `kimi-data emit --workdir DIR --repo ORG/NAME` first so its load line names the repo.
    """
    import sys

    if not sys.stderr.isatty():   # per-file upload bars are noise in logs
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    result = push_dataset(path, repo_id, private=private, token_env=token_env, dry_run=dry_run)
    ds = load_local(path, verify=False)
    if result.status != "already published":
        for note in result.notes:
            console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    if result.status == "dry run":
        out.print(f"dry run: {tree_summary(ds.files)}, {_human(result.bytes)}, of {ds.root} match manifest.json; "
                  f"would push version {ds.version} to {repo_id} as tag {result.tag}"
                  + (" (private)" if private else "") + "; nothing sent", highlight=False, soft_wrap=True)
        return
    if result.status == "already published":
        out.print(f"already published: {repo_id} {result.tag} has the same content"
                  + (f" (commit {result.commit_oid[:12]})" if result.commit_oid else ""), highlight=False,
                  soft_wrap=True)
    else:
        out.print(f"pushed {tree_summary(ds.files)}, {_human(result.bytes)}, to {repo_id} as {result.tag}",
                  highlight=False, soft_wrap=True)
        out.print(f"commit: {result.commit_url}", highlight=False, soft_wrap=True)
    out.print("\nLoad it with:")
    out.print(f"  from datasets import load_dataset; ds = {result.load_line(ds.first_config)}",
              highlight=False, soft_wrap=True)


@click.command()
@click.argument("path", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["specforge", "speculators"]), default="specforge",
              show_default=True,
              help="specforge: JSONL {id, input_ids, loss_mask} for SpecForge's data.prompts_path; "
                   "speculators: what speculators' prepare_data writes: an Arrow dataset (save_to_disk, torch "
                   "format) with input_ids, loss_mask (int64 lists) and seq_len (int64).")
@click.option("--split", type=click.Choice(["train", "rejected"]), default="train", show_default=True)
@click.option("--configs", "configs", multiple=True, metavar="CFG[,CFG…]", callback=click_config_names,
              help="Configs to export (repeatable or comma-separated; default: all).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=True, path_type=Path),
              help="Output file (specforge: .jsonl) or directory (speculators); replaced atomically.")
@click.option("--draft-vocab-size", type=click.IntRange(min=1), metavar="N",
              help="specforge: also write SpecForge's d2t/t2d mapping of the N most frequent loss-token ids "
                   "to vocab_mapping.pt beside --out (model.vocab_mapping_path; the draft config's "
                   "draft_vocab_size must be N).")
@click.option("--shuffle", is_flag=True,
              help="Rows in one seeded random order across configs (default: config by config, so a trainer's "
                   "positional train/eval split would hold out whole configs).")
@click.option("--seed", type=int, help="The --shuffle order's seed.  [default: 0]")
@friendly_errors(interrupted=REWRITES)
def export(path: Path, fmt: str, split: str, configs: tuple[str, ...], out_path: Path, draft_vocab_size: int | None,
           shuffle: bool, seed: int | None):
    """Export DIR's token rows (a workdir or its dataset/) for an EAGLE-3 trainer.

    \b
    Rows are streamed from the Parquet shards (flat memory) in config order
    (--shuffle: one seeded order across configs); input_ids and loss_mask are
    copied exactly (loss_mask: 0 prompt, 1 completion). Prints the longest
    row: set the trainer's maximum length to at least that.
    SpecForge:   data.prompts_path: FILE.jsonl   (pre-tokenized rows);
                 --draft-vocab-size N: model.vocab_mapping_path: vocab_mapping.pt
    speculators: datasets.load_from_disk(DIR), DIR/token_freq.pt (loss-token
                 counts per id, which its trainer's --draft-vocab-size needs)
    """
    # lazy: keeps pyarrow and pyarrow.compute (the export) out of every CLI start
    from kimi_eagle_data.hub.export import SPECFORGE_MAX_LENGTH, export_dataset

    chosen = [c.strip() for v in configs for c in v.split(",") if c.strip()] or None
    if fmt == "speculators" and out_path.exists() and not out_path.is_dir():
        raise click.BadParameter(f"{out_path} is a file; speculators writes a directory", param_hint="--out")
    if fmt == "specforge" and out_path.is_dir():
        raise click.BadParameter(f"{out_path} is a directory; specforge writes a .jsonl file", param_hint="--out")
    if draft_vocab_size is not None and fmt != "specforge":
        raise click.BadParameter("is for --format specforge; speculators builds its mapping from token_freq.pt "
                                 "with its trainer's own --draft-vocab-size", param_hint="--draft-vocab-size")
    if seed is not None and not shuffle:
        raise click.BadParameter("orders --shuffle; pass --shuffle too", param_hint="--seed")
    rep = export_dataset(path, out_path, fmt=fmt, split=split, configs=chosen, draft_vocab_size=draft_vocab_size,
                         shuffle_seed=(seed or 0) if shuffle else None)
    per = ", ".join(f"{c} {n:,}" for c, n in rep.configs.items())
    order = f", shuffled with seed {seed or 0}" if shuffle else ""
    out.print(f"exported {rep.rows:,} {split} {plural(rep.rows, 'row')} ({counted(rep.tokens, 'token')}, "
              f"{rep.loss_tokens:,} with loss) to "
              f"{rep.out} ({fmt}{order}): {per}", highlight=False, soft_wrap=True)
    for written in rep.written:
        out.print(f"wrote {written}", highlight=False, soft_wrap=True)
    length, config, row_id = rep.longest
    over = (f"; {rep.over_specforge_max:,} {plural(rep.over_specforge_max, 'row')} exceed SpecForge's default "
            f"data.max_length of {SPECFORGE_MAX_LENGTH:,}, which cuts them silently") if rep.over_specforge_max else ""
    out.print(f"longest row: {length:,} tokens ({config} {row_id}): set the trainer's maximum length "
              f"(SpecForge data.max_length, speculators --total-seq-len) to at least that{over}",
              highlight=False, soft_wrap=True)
    if rep.skipped:
        out.print(f"no {split} rows in {', '.join(rep.skipped)}", highlight=False)
    if rep.stale:
        console.print(f"[yellow]warning:[/] {escape(rep.stale)}", highlight=False, soft_wrap=True)

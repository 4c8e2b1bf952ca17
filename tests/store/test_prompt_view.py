"""store/prompt_view.py's rules on a workdir made by hand (a prepared file and a checkpoint): which stored later
turns belong to the selection, which completions answer today's prompts, what a checkpoint from before prompt
hashes counts as. The end-to-end runs are tests/conversation/test_selection_changes.py."""

from __future__ import annotations

from kimi_eagle_data.prompts.prepare import PrepareReport
from kimi_eagle_data.prompts.prepared_file import write_prepared
from kimi_eagle_data.records import Completion, ConversationEnd, PromptRecord
from kimi_eagle_data.store.checkpoint import Checkpoint
from kimi_eagle_data.store.checkpoint_set import CheckpointSet
from kimi_eagle_data.store.prompt_hash import conversation_origin, prompt_hash
from kimi_eagle_data.store.prompt_view import ConfigPrompts
from kimi_eagle_data.store.workdir import Workdir

C = "C1"
SCRIPT = [{"role": "assistant", "content": "a"}, {"role": "user", "content": "next?"}]


def first(i: str, ids: list[int], script=SCRIPT) -> PromptRecord:
    return PromptRecord(i, C, "src", i, [{"role": "user", "content": i}], None, ids, script=script)


def later(conv: str, turn: int, ids: list[int]) -> PromptRecord:
    return PromptRecord(f"{conv}-t{turn}", C, "src", conv, [], None, ids, conversation_id=conv, turn=turn)


def done(i: str) -> Completion:
    return Completion(i, [7, 8], "stop", {"type": "stop"})


def make(tmp_path, prepared: list[PromptRecord]) -> Workdir:
    wd = Workdir.at(tmp_path / "w")
    write_prepared(wd, C, prepared, [], PrepareReport(config=C, source="src", selected=len(prepared),
                                                      prepared=len(prepared)))
    return wd


def view(wd: Workdir) -> ConfigPrompts:
    ckpts = CheckpointSet(wd.checkpoint_paths(), readonly=True)
    try:
        return ConfigPrompts.read(wd, C, ckpts)
    finally:
        ckpts.close()


def test_the_rules(tmp_path):
    a, b, gone = first("C1-a", [1, 2]), first("C1-b", [3, 4]), first("C1-gone", [5, 6])
    wd = make(tmp_path, [a, b])                    # "gone" was a pilot's: not in this selection
    origin = {r.id: conversation_origin(prompt_hash(r.prompt_ids), r.script) for r in (a, b, gone)}
    ck = Checkpoint(wd.shard_checkpoint(None))
    # a: answered its prompt; turn 2 derived from its conversation as prepared now, answered; ended at turn 2
    ck.commit(C, done("C1-a"), later("C1-a", 2, [1, 2, 9]), prompt_hash=prompt_hash([1, 2]), origin=origin["C1-a"])
    ck.commit(C, done("C1-a-t2"), ConversationEnd("C1-a", C, 2, "max_turns", "m"), prompt_hash=prompt_hash([1, 2, 9]),
              origin=origin["C1-a"])
    # b: its completion answered an earlier prompt (the row was edited in place); its turn 2 derives from that
    ck.commit(C, done("C1-b"), later("C1-b", 2, [3, 0]), prompt_hash=prompt_hash([3, 3]), origin="earlier")
    # gone: a pilot's conversation, two later turns kept
    ck.commit(C, done("C1-gone"), later("C1-gone", 2, [5]), prompt_hash=prompt_hash([5, 6]), origin=origin["C1-gone"])
    ck.commit(C, done("C1-gone-t2"), later("C1-gone", 3, [5, 5]), prompt_hash=prompt_hash([5]),
              origin=origin["C1-gone"])
    ck.close()

    v = view(wd)
    assert v.ids() == ["C1-a", "C1-a-t2", "C1-b"]
    assert v.done == {"C1-a", "C1-a-t2"} and v.stale_done == {"C1-b"}
    assert v.stale_turns == {"C1-b-t2": "C1-b"} and v.kept_not_selected == 2
    assert v.completions_not_selected == 2 and set(v.ends) == {"C1-a"}
    assert v.answers("C1-a", prompt_hash([1, 2])) and not v.answers("C1-b", prompt_hash([3, 3]))
    assert not v.answers("C1-gone", prompt_hash([5, 6]))          # not a prompt of the view
    assert v.to_continue() == []            # b's turn 1 does not stand: it is generated again, not continued


def test_a_changed_script_continues_the_conversation_from_its_first_turn(tmp_path):
    a = first("C1-a", [1, 2], script=[*SCRIPT[:1], {"role": "user", "content": "edited"}])
    wd = make(tmp_path, [a])
    ck = Checkpoint(wd.shard_checkpoint(None))
    before = conversation_origin(prompt_hash([1, 2]), SCRIPT)
    ck.commit(C, done("C1-a"), later("C1-a", 2, [1, 2, 9]), prompt_hash=prompt_hash([1, 2]), origin=before)
    ck.close()
    v = view(wd)
    assert v.done == {"C1-a"} and v.later == {} and v.stale_turns == {"C1-a-t2": "C1-a"}
    assert v.to_continue() == [("C1-a", "C1-a")]


def test_rows_stored_before_prompt_hashes_count_as_answering(tmp_path):
    a = first("C1-a", [1, 2])
    wd = make(tmp_path, [a])
    ck = Checkpoint(wd.shard_checkpoint(None))
    ck.commit(C, done("C1-a"), later("C1-a", 2, [1, 2, 9]))     # no hash, no origin: an earlier version's rows
    ck.close()
    v = view(wd)
    assert v.ids() == ["C1-a", "C1-a-t2"] and v.done == {"C1-a"} and not v.stale_done and not v.stale_turns

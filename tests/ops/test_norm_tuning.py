"""The norms' tuning table (ops/norm_tuning.py) and ``norm.tuned``, which sets its knobs for a block."""

from __future__ import annotations

import dataclasses

import pytest

from blockfuse.ops import norm
from blockfuse.ops.norm_tuning import FIELDS, NormTuning, field_name


def test_knobs_are_named_in_either_case():
    default = NormTuning()
    table = default.replace(JOINT_SUMS=not default.joint_sums, bwd_reload=False)
    assert table.joint_sums is not default.joint_sums and table.bwd_reload is False
    assert field_name("FWD_MAX_LANES") == field_name("fwd_max_lanes") == "fwd_max_lanes"
    assert dataclasses.replace(table, joint_sums=default.joint_sums) == default.replace(BWD_RELOAD=False)


def test_an_unknown_knob_names_the_nearest():
    with pytest.raises(ValueError, match="unknown norm tuning knob 'JOINT_SUM'.*JOINT_SUMS"):
        NormTuning().replace(JOINT_SUM=True)
    with pytest.raises(ValueError, match="given twice"):
        NormTuning().replace(JOINT_SUMS=True, joint_sums=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        norm.TUNING.joint_sums = True


def test_values_once_computed_from_others_are_their_own():
    """The fields that were computed at import keep those values, and setting the ones they came from moves nothing
    else."""
    table = NormTuning()
    assert table.fwd_vector_tail_lanes == table.bwd_pieces_max_tail == 4 * 32 * table.tail_vector
    assert norm.LAYOUT_TAIL_LANES.value == table.bwd_pieces_max_tail
    assert table.act_bwd_piece_lanes_per_warp == 32 * table.act_bwd_piece_lanes_per_thread
    assert table.act_bwd_pieces_max_lanes == table.act_bwd_piece_lanes_per_warp * table.act_bwd_piece_max_warps
    moved = table.replace(TAIL_VECTOR=16, ACT_BWD_PIECE_LANES_PER_THREAD=8)
    assert dataclasses.replace(moved, tail_vector=table.tail_vector,
                               act_bwd_piece_lanes_per_thread=table.act_bwd_piece_lanes_per_thread) == table
    assert len(FIELDS) == len(dataclasses.fields(NormTuning))


def test_tuned_sets_knobs_for_the_block_and_the_rules_follow():
    """norm.tuned swaps the table in for its block and back after it (on an error too), nested blocks on top of each
    other, and clears the rules' caches on both sides: a cached rule (_three_pieces reads BWD_WIDE_PIECE_WARPS) gives
    the block's answer, then the default's again."""
    default = norm.TUNING
    before = norm._three_pieces(12800, 2)
    with norm.tuned(BWD_WIDE_PIECE_WARPS=8) as table:
        assert norm.TUNING is table and table.bwd_wide_piece_warps == 8
        assert norm._three_pieces(12800, 2).num_warps == 8
        with norm.tuned(joint_sums=True):
            assert norm.TUNING.joint_sums and norm.TUNING.bwd_wide_piece_warps == 8
        assert norm.TUNING is table
    assert norm.TUNING is default and norm._three_pieces(12800, 2) == before
    with pytest.raises(ZeroDivisionError), norm.tuned(BWD_STAGES=2):
        1 / 0
    assert norm.TUNING is default
    with pytest.raises(ValueError), norm.tuned(BWD_STAGE=2):
        pass
    assert norm.TUNING is default

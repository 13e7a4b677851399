"""The simulator's fault picker spreads the share evenly: any window of requests carries the
configured share of faults (up to one), so a short stage sees as many faults as its length
promises, and the same seed faults the same positions."""

from __future__ import annotations

import pytest

from loadknee_locust.sim.faults import FaultPicker


def _picks(share: float, seed: int, n: int, *, with_id: bool = True) -> list[bool]:
    picker = FaultPicker("stall", share, seed)
    return [picker.pick(has_client_id=with_id) is not None for _ in range(n)]


@pytest.mark.parametrize(
    ("share", "n", "least", "most"),
    [(0.25, 35, 8, 9), (0.25, 8, 2, 2), (0.5, 10, 5, 5), (0.1, 30, 3, 3), (1.0, 7, 7, 7),
     (0.0, 50, 0, 0), (0.3, 100, 30, 30)],
)  # fmt: skip
@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_the_first_n_requests_carry_the_share(
    share: float, n: int, least: int, most: int, seed: int
) -> None:
    assert least <= sum(_picks(share, seed, n)) <= most


@pytest.mark.parametrize("seed", [0, 3])
def test_every_window_carries_the_share_up_to_one(seed: int) -> None:
    picks = _picks(0.25, seed, 200)
    for start in range(0, 200 - 12):
        assert 2 <= sum(picks[start : start + 12]) <= 4


def test_same_seed_same_positions_and_seeds_differ() -> None:
    assert _picks(0.25, 5, 40) == _picks(0.25, 5, 40)
    assert len({tuple(_picks(0.25, seed, 40)) for seed in range(8)}) > 1


def test_probes_without_a_client_id_are_never_faulted_and_do_not_move_the_count() -> None:
    picker = FaultPicker("http_500", 0.5, 0)
    assert all(picker.pick(has_client_id=False) is None for _ in range(10))
    assert sum(picker.pick(has_client_id=True) is not None for _ in range(10)) == 5


def test_mode_none_never_faults() -> None:
    assert not any(_picks_mode_none())


def _picks_mode_none() -> list[bool]:
    picker = FaultPicker("none", 0.9, 0)
    return [picker.pick(has_client_id=True) is not None for _ in range(20)]


def test_a_threshold_faults_only_requests_past_it_and_counts_only_those() -> None:
    picker = FaultPicker("http_503", 0.5, 0, above_in_flight=4)
    assert all(picker.pick(has_client_id=True, in_flight=n) is None for n in (1, 2, 3, 4) * 5)
    assert sum(picker.pick(has_client_id=True, in_flight=5) is not None for _ in range(10)) == 5

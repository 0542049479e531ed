"""The fair protocol's kernels on hand-built inputs: ranking rescale, targets, calibrated quotas."""

from __future__ import annotations

import math

import pytest
import torch

from fedchain.fl.fairness import accuracy_targets, calibrated_quotas, monotone_curve, rescale_unit

F64 = torch.float64
GRID = (0.01, 0.1, 1.0)
#: Accuracy each GRID quota buys.
CURVE = (0.5, 0.8, 0.9)


def test_rescale_unit_maps_the_eligible_range_to_0_1_and_the_others_to_0() -> None:
    values = torch.tensor([2.0, 4.0, 3.0, 100.0], dtype=F64)
    eligible = torch.tensor([True, True, True, False])

    scaled = rescale_unit(values, eligible)

    torch.testing.assert_close(scaled, torch.tensor([0.0, 1.0, 0.5, 0.0], dtype=F64))


def test_rescale_unit_gives_equal_values_all_1_and_treats_nan_as_ineligible() -> None:
    equal = rescale_unit(torch.tensor([3.0, 3.0, math.nan], dtype=F64), torch.tensor([True, True, True]))

    assert equal.tolist() == [1.0, 1.0, 0.0]
    assert rescale_unit(torch.tensor([1.0, 2.0]), torch.tensor([False, False])).tolist() == [0.0, 0.0]


def test_targets_span_spread_below_the_top_accuracy() -> None:
    targets = accuracy_targets(torch.tensor([0.0, 0.5, 1.0]), top_accuracy=0.9, spread=0.2)

    torch.testing.assert_close(targets, torch.tensor([0.7, 0.8, 0.9], dtype=F64))


def test_monotone_curve_is_the_running_maximum() -> None:
    assert monotone_curve([0.5, 0.7, 0.65, 0.9]) == [0.5, 0.7, 0.7, 0.9]


def test_a_target_on_the_curve_gets_its_grid_quota_exactly() -> None:
    quotas = calibrated_quotas(GRID, CURVE, torch.tensor(CURVE, dtype=F64))

    torch.testing.assert_close(quotas, torch.tensor(GRID, dtype=F64))


def test_a_target_between_grid_points_is_interpolated_on_the_log_quota_scale() -> None:
    """0.65 is half way from 0.5 (quota 0.01) to 0.8 (quota 0.1): exp((ln 0.01 + ln 0.1) / 2) = 0.031623.
    0.85 is half way from 0.8 (0.1) to 0.9 (1.0): sqrt(0.1) = 0.316228."""
    quotas = calibrated_quotas(GRID, CURVE, torch.tensor([0.65, 0.85], dtype=F64))

    torch.testing.assert_close(quotas, torch.tensor([0.031623, 0.316228], dtype=F64), atol=1e-6, rtol=0)


def test_targets_outside_the_curve_get_the_first_or_last_quota() -> None:
    quotas = calibrated_quotas(GRID, CURVE, torch.tensor([0.1, 0.95], dtype=F64))

    assert quotas.tolist() == [0.01, 1.0]


def test_a_dip_in_the_curve_does_not_make_quotas_go_down_with_the_target() -> None:
    """Measured 0.5, 0.8, 0.7, 0.9: the monotone curve is 0.5, 0.8, 0.8, 0.9, so 0.8 buys quota 0.1, not more."""
    grid = (0.01, 0.1, 0.3, 1.0)

    quotas = calibrated_quotas(grid, (0.5, 0.8, 0.7, 0.9), torch.tensor([0.75, 0.8, 0.85], dtype=F64))

    assert quotas[1].item() == pytest.approx(0.1)
    assert quotas.tolist() == sorted(quotas.tolist())


@pytest.mark.parametrize(("grid", "curve"), [((0.1, 0.01), (0.5, 0.8)), ((0.0, 1.0), (0.5, 0.8)), ((0.1, 1.0), (0.5,))])
def test_a_malformed_calibration_is_refused(grid: tuple[float, ...], curve: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match=r"grid|accuracy"):
        calibrated_quotas(grid, curve, torch.tensor([0.6], dtype=F64))

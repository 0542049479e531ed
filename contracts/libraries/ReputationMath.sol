// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ReputationMath: the mechanism's formulas in 1e18 fixed point (DESIGN.md, seed tian2023)
/// @notice Pure functions shared by RoundLedger and FogAuction. fedchain/fl/reputation.py computes
/// the same values to the wei; every division rounds down, in the order written here.
/// Bounds that keep every product below 2^256: reputations and qualities <= MAX_REPUTATION_CAP,
/// rounds <= MAX_ROUNDS, psi and phi < 2^128, durations < 2^32 seconds.
library ReputationMath {
    /// @notice 1.0 in fixed point.
    uint256 internal constant ONE = 1e18;
    /// @notice The largest reputation cap a task may set (10.0): keeps running sums within 96 bits.
    uint256 internal constant MAX_REPUTATION_CAP = 10e18;
    /// @notice The largest number of rounds a task may have.
    uint256 internal constant MAX_ROUNDS = 1000;

    /// @notice Linear-weight running mean: sum_j w^j x_j with w^j = 2j / (k(k+1)), given sum_j j * x_j.
    /// @param weightedSum sum over j = 1..k of j * x_j, fixed point
    /// @param k number of terms (> 0)
    function linearMean(uint256 weightedSum, uint256 k) internal pure returns (uint256) {
        return (2 * weightedSum) / (k * (k + 1));
    }

    /// @notice T / t as a capped fixed-point ratio, T = T_ex / N: min(cap, T_ex * 1e36 / (N * t)).
    /// @param expectedDuration T_ex, seconds
    /// @param rounds N
    /// @param timeFp t, seconds in 1e18 fixed point (> 0)
    /// @param cap reputation cap, fixed point
    function timeRatio(uint256 expectedDuration, uint256 rounds, uint256 timeFp, uint256 cap) internal pure returns (uint256) {
        uint256 ratio = (expectedDuration * ONE * ONE) / (rounds * timeFp);
        return ratio < cap ? ratio : cap;
    }

    /// @notice Eq. 9's slow-round penalty: r * t_max / t when t > t_max, else r.
    /// @param rep the reputation, fixed point
    /// @param maxTime t_max, seconds
    /// @param timeFp t, seconds in fixed point
    function timePenalty(uint256 rep, uint256 maxTime, uint256 timeFp) internal pure returns (uint256) {
        uint256 maxFp = maxTime * ONE;
        return timeFp > maxFp ? (rep * maxFp) / timeFp : rep;
    }

    /// @notice Eq. 8: the linear mean of the qualities plus the cross-task prior H_i when q >= q_min; below
    /// q_min the mean times q alone (the decay), without the prior, so that a good history cannot carry a
    /// client through a round in which it sent garbage. Then capped. (fedchain/fl/reputation.py caps the
    /// mean before adding the prior; as the prior is never negative, that is the same value to the wei.)
    /// @param weightedSum sum over j = 1..k of j * q_j, fixed point
    /// @param k number of scored rounds, this one included (> 0)
    /// @param quality q_k, this round's (capped) quality, fixed point
    /// @param minQuality q_min, fixed point
    /// @param prior H_i, fixed point
    /// @param cap reputation cap, fixed point
    function lossReputation(uint256 weightedSum, uint256 k, uint256 quality, uint256 minQuality, uint256 prior, uint256 cap)
        internal
        pure
        returns (uint256 rep)
    {
        rep = linearMean(weightedSum, k);
        rep = quality < minQuality ? (rep * quality) / ONE : rep + prior;
        if (rep > cap) rep = cap;
    }

    /// @notice Eq. 9: the linear mean of T / t_j, penalised when the last round was slower than t_max, capped.
    function timeReputation(uint256 weightedSum, uint256 k, uint256 maxTime, uint256 lastTimeFp, uint256 cap)
        internal
        pure
        returns (uint256 rep)
    {
        rep = timePenalty(linearMean(weightedSum, k), maxTime, lastTimeFp);
        if (rep > cap) rep = cap;
    }

    /// @notice Eq. 15: psi * r_t^2 * r_a when r_t >= r_t_min and r_a >= r_a_min, else 0. Wei.
    /// Computed as ((psi * r_t * r_t) / 1e36) * r_a / 1e18.
    function roundPayment(uint256 psi, uint256 lossRep, uint256 timeRep, uint256 minLossRep, uint256 minTimeRep)
        internal
        pure
        returns (uint256)
    {
        if (lossRep < minLossRep || timeRep < minTimeRep) return 0;
        return (((psi * timeRep * timeRep) / (ONE * ONE)) * lossRep) / ONE;
    }

    /// @notice Eq. 10: r_at = min(cap, r_a * r_t / 1e18). Capped like every other reputation, so that the
    /// final bonus of eq. 16 is bounded as designed (uncapped, r_at reached cap^2).
    function totalReputation(uint256 lossRep, uint256 timeRep, uint256 cap) internal pure returns (uint256) {
        uint256 rep = (lossRep * timeRep) / ONE;
        return rep < cap ? rep : cap;
    }

    /// @notice The most one client can be paid in one round (eq. 15 at r_a = r_t = cap), wei.
    function maxRoundPayment(uint256 psi, uint256 cap) internal pure returns (uint256) {
        return roundPayment(psi, cap, cap, 0, 0);
    }

    /// @notice Eq. 16: phi * max(0, T_ex - T_r) * r_at / 1e18, wei.
    /// @param phi wei per second per unit of r_at
    /// @param expectedDuration T_ex, seconds
    /// @param actualDuration T_r, seconds
    /// @param totalRep r_at, fixed point
    function finalBonus(uint256 phi, uint256 expectedDuration, uint256 actualDuration, uint256 totalRep)
        internal
        pure
        returns (uint256)
    {
        if (actualDuration >= expectedDuration) return 0;
        return (phi * (expectedDuration - actualDuration) * totalRep) / ONE;
    }

    /// @notice Pro-rata scaling: amount * available / total when total > available, else amount.
    function scaled(uint256 amount, uint256 total, uint256 available) internal pure returns (uint256) {
        return total > available ? (amount * available) / total : amount;
    }

    /// @notice Eq. 11 in fixed point: T_x = c * D / f seconds, as c * D * 1e18 / f.
    function jobTime(uint256 cyclesPerSample, uint256 dataSize, uint256 frequency) internal pure returns (uint256) {
        return (cyclesPerSample * dataSize * ONE) / frequency;
    }
}

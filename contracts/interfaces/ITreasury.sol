// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ITreasury: the one place where FedChain's ether lives
/// @notice Every wei that enters FedChain (task budgets, client deposits, fog deposits, client escrows
/// for fog jobs, aggregator bonds, challenge bonds) is held here in a pool per task. The other contracts
/// (the "modules": TaskRegistry, RoundLedger, FogAuction, Disputes) move money out of a task's pool into an
/// account's claimable balance; only the account itself takes it out, through `withdraw` (pull payments).
/// Forfeits and slashes that no wronged party is owed go to the sink, an address fixed at deployment
/// (the zero address by default: nobody can ever withdraw its balance, so that money is burned).
/// Invariant: `address(this).balance == totalHeld + totalClaimable` and
/// `totalDeposited == totalWithdrawn + totalHeld + totalClaimable`, to the wei.
interface ITreasury {
    /// @notice Accounting totals, all in wei.
    /// @param deposited everything that ever entered
    /// @param withdrawn everything that ever left through `withdraw`
    /// @param held what the task pools hold now
    /// @param claimable what accounts may withdraw now
    struct Totals {
        uint256 deposited;
        uint256 withdrawn;
        uint256 held;
        uint256 claimable;
    }

    /// @notice The caller is not one of the four FedChain modules.
    /// @param caller the rejected caller
    error TreasuryUnauthorized(address caller);
    /// @notice A module asked to pay more out of a task's pool than it holds.
    /// @param taskId the task
    /// @param requested wei asked for
    /// @param held wei the pool holds
    error TreasuryPoolExhausted(uint256 taskId, uint256 requested, uint256 held);
    /// @notice `withdraw` was called with nothing to withdraw.
    /// @param account the caller
    error TreasuryNothingToWithdraw(address account);
    /// @notice The ether transfer of a withdrawal failed (the recipient reverted); nothing changed.
    /// @param account the recipient
    /// @param amount wei
    error TreasuryTransferFailed(address account, uint256 amount);

    /// @notice The Treasury was deployed with this sink (in its constructor; it never changes).
    /// @param sink where forfeits go that no wronged party is owed (address(0): burned)
    event SinkSet(address indexed sink);
    /// @notice Wei entered a task's pool.
    /// @param taskId the task
    /// @param from who sent it (the payer, not the module)
    /// @param amount wei
    /// @param held the pool's balance after, wei
    event Deposited(uint256 indexed taskId, address indexed from, uint256 amount, uint256 held);
    /// @notice Wei moved from a task's pool to an account's claimable balance.
    /// @param taskId the task
    /// @param to the account credited
    /// @param amount wei
    /// @param reason why, a code of the `Reasons` library
    event Credited(uint256 indexed taskId, address indexed to, uint256 amount, bytes32 indexed reason);
    /// @notice An account took its claimable balance out.
    /// @param account the account
    /// @param amount wei
    event Withdrawn(address indexed account, uint256 amount);

    /// @notice Put `msg.value` into `taskId`'s pool on behalf of `from`. Modules only.
    /// @param taskId the task
    /// @param from the payer, recorded in the event
    function deposit(uint256 taskId, address from) external payable;

    /// @notice Move `amount` wei from `taskId`'s pool to the sink's balance (a `Credited` event to the sink). Modules only.
    /// @param taskId the task
    /// @param amount wei (0 is a no-op without event)
    /// @param reason why, a code of the `Reasons` library
    function creditSink(uint256 taskId, uint256 amount, bytes32 reason) external;

    /// @notice Move `amount` wei from `taskId`'s pool to `to`'s claimable balance. Modules only.
    /// @param taskId the task
    /// @param to the account credited
    /// @param amount wei (0 is a no-op without event)
    /// @param reason why, a code of the `Reasons` library
    function credit(uint256 taskId, address to, uint256 amount, bytes32 reason) external;

    /// @notice Send the caller its whole claimable balance.
    /// @return amount wei sent
    function withdraw() external returns (uint256 amount);

    /// @notice Wei `account` may withdraw now.
    function claimable(address account) external view returns (uint256);

    /// @notice Wei held in `taskId`'s pool.
    function held(uint256 taskId) external view returns (uint256);

    /// @notice The accounting totals (see `Totals`).
    function totals() external view returns (Totals memory);

    /// @notice Where forfeits go that no wronged party is owed, fixed at deployment (address(0): burned).
    function sink() external view returns (address);
}

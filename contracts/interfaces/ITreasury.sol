// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ITreasury: the one place where FedChain's money lives
/// @notice A task's money is ether or one ERC-20 token, chosen at creation (`tokenOf`; address(0) is ether);
/// amounts are in the asset's smallest unit and every figure below is kept per asset.
/// Every wei that enters FedChain (task budgets, client deposits, fog deposits, client escrows
/// for fog jobs, aggregator bonds, challenge bonds) is held here in a pool per task. The other contracts
/// (the "modules": TaskRegistry, RoundLedger, FogAuction, Disputes) move money out of a task's pool into an
/// account's claimable balance; only the account itself takes it out, through `withdraw` (pull payments).
/// Forfeits and slashes that no wronged party is owed go to the sink, an address fixed at deployment
/// (the zero address by default: nobody can ever withdraw its balance, so that money is burned).
/// Invariant, per asset: `address(this).balance == totalHeld + totalClaimable` for ether,
/// `token.balanceOf(this) >= totalHeld + totalClaimable` for a token (tokens sent to it directly are never counted),
/// and `totalDeposited == totalWithdrawn + totalHeld + totalClaimable`, to the unit.
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

    /// @notice An EIP-2612 permit for the Treasury (the spender) of the amount being paid.
    /// @param deadline the permit's deadline
    /// @param v the signature's v
    /// @param r the signature's r
    /// @param s the signature's s
    struct Permit {
        uint256 deadline;
        uint8 v;
        bytes32 r;
        bytes32 s;
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

    /// @notice `msg.value` does not fit the task's asset: the amount for an ether task, 0 for a token task.
    /// @param sent wei sent
    /// @param expected wei expected
    error TreasuryWrongValue(uint256 sent, uint256 expected);
    /// @notice The token of a task is not a contract.
    /// @param token the address given
    error TreasuryNotAToken(address token);
    /// @notice The task already has its asset.
    /// @param taskId the task
    error TreasuryTokenAlreadyBound(uint256 taskId);
    /// @notice The payer has not allowed the Treasury to pull the amount (approve it, or sign a permit).
    /// @param token the token
    /// @param owner the payer
    /// @param allowance what the payer allows the Treasury now
    /// @param needed what this payment pulls
    error TreasuryAllowanceTooLow(address token, address owner, uint256 allowance, uint256 needed);
    /// @notice Fewer tokens arrived than were paid (a fee-on-transfer or rebasing token): FedChain refuses such tokens.
    /// @param token the token
    /// @param expected the amount paid
    /// @param received what the Treasury's balance grew by
    error TreasuryTokenShortfall(address token, uint256 expected, uint256 received);

    /// @notice The Treasury was deployed with this sink (in its constructor; it never changes).
    /// @param sink where forfeits go that no wronged party is owed (address(0): burned)
    event SinkSet(address indexed sink);
    /// @notice A task's money is in `token` (emitted once, at creation, for token tasks only).
    /// @param taskId the task
    /// @param token the ERC-20 token
    event TokenBound(uint256 indexed taskId, address indexed token);
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
    /// @notice An account took its claimable balance in one asset out.
    /// @param account the account whose balance it was
    /// @param token the asset (address(0): ether)
    /// @param to where it was sent
    /// @param amount units sent
    event Withdrawn(address indexed account, address indexed token, address to, uint256 amount);

    /// @notice Make `token` the asset of `taskId`, before its first deposit. TaskRegistry only, through the modules' check.
    /// @param taskId the new task
    /// @param token the ERC-20 token (must be a contract)
    function bindToken(uint256 taskId, address token) external;

    /// @notice Put `amount` into `taskId`'s pool on behalf of `from`. Modules only. For an ether task
    /// `msg.value` must be `amount`; for a token task it must be 0 and the Treasury pulls `amount` from `from`.
    /// @param taskId the task
    /// @param from the payer, recorded in the event
    /// @param amount units paid
    function deposit(uint256 taskId, address from, uint256 amount) external payable;

    /// @notice Try `owner`'s EIP-2612 permit of `amount` for the Treasury on `token`, then check the allowance
    /// (so a permit that someone front-ran does no harm). Modules only.
    /// @param token the token
    /// @param owner the payer who signed
    /// @param amount the permit's value
    /// @param permit the signature and deadline
    function usePermit(address token, address owner, uint256 amount, Permit calldata permit) external;

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

    /// @notice Send the caller its whole claimable ether balance.
    /// @return amount wei sent
    function withdraw() external returns (uint256 amount);

    /// @notice Send the caller's whole claimable balance in `token` (address(0): ether) to `to`. A failed transfer
    /// (a blacklisted recipient, a paused token) reverts the call, so the balance stays claimable for a retry.
    /// @param token the asset
    /// @param to the recipient
    /// @return amount units sent
    function withdrawTo(address token, address to) external returns (uint256 amount);

    /// @notice Wei `account` may withdraw now.
    function claimable(address account) external view returns (uint256);

    /// @notice Units of `token` (address(0): ether) `account` may withdraw now.
    function claimableIn(address token, address account) external view returns (uint256);

    /// @notice The asset of `taskId`: its ERC-20 token, or address(0) for ether.
    function tokenOf(uint256 taskId) external view returns (address);

    /// @notice What `msg.value` a payment of `amount` into `taskId` needs: `amount` for ether, 0 for a token.
    function expectedValue(uint256 taskId, uint256 amount) external view returns (uint256);

    /// @notice The accounting totals of one asset (see `Totals`).
    function totalsIn(address token) external view returns (Totals memory);

    /// @notice Wei held in `taskId`'s pool.
    function held(uint256 taskId) external view returns (uint256);

    /// @notice The ether accounting totals (see `Totals`).
    function totals() external view returns (Totals memory);

    /// @notice Where forfeits go that no wronged party is owed, fixed at deployment (address(0): burned).
    function sink() external view returns (address);
}

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title BlacklistToken: a USDC-like test token: 6 decimals, a blacklist and a pause; anyone mints and administers
/// @notice A blacklisted address can neither send nor receive; while paused, no transfer moves.
contract BlacklistToken is ERC20 {
    /// @notice A transfer from or to a blacklisted account.
    error Blacklisted(address account);
    /// @notice A transfer while the token is paused.
    error Paused();

    mapping(address account => bool) public blacklisted;
    bool public paused;

    constructor() ERC20("Blacklist USD", "bUSD") {}

    /// @notice Mint `amount` to `to` (test token: anyone may).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice Put `account` on the blacklist, or take it off.
    function setBlacklisted(address account, bool value) external {
        blacklisted[account] = value;
    }

    /// @notice Pause or unpause every transfer.
    function setPaused(bool value) external {
        paused = value;
    }

    /// @inheritdoc ERC20
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function _update(address from, address to, uint256 value) internal override {
        if (paused) revert Paused();
        if (blacklisted[from]) revert Blacklisted(from);
        if (blacklisted[to]) revert Blacklisted(to);
        super._update(from, to, value);
    }
}

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title ZeroRevertToken: a test token that reverts on zero-value transfers (as some do); anyone mints
contract ZeroRevertToken is ERC20 {
    /// @notice A transfer of zero tokens.
    error ZeroTransfer();

    constructor() ERC20("Zero Revert", "ZERO") {}

    /// @notice Mint `amount` to `to` (test token: anyone may).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (value == 0) revert ZeroTransfer();
        super._update(from, to, value);
    }
}

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title FeeToken: a fee-on-transfer test token: 1% of every transfer is burned on the way; anyone mints
contract FeeToken is ERC20 {
    constructor() ERC20("Fee Token", "FEE") {}

    /// @notice Mint `amount` to `to` (test token: anyone may).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (from == address(0) || to == address(0)) return super._update(from, to, value);
        uint256 fee = value / 100;
        super._update(from, address(0), fee);
        super._update(from, to, value - fee);
    }
}

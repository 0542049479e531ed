// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ITreasury} from "../../interfaces/ITreasury.sol";

/// @title ReentrantToken: a test token that calls back into the Treasury from inside every transfer once armed
/// @notice Armed, each transfer tries `withdrawTo` on the Treasury for the token itself: the Treasury's guard must
/// make the whole payment revert, so a token can never move money while the Treasury is mid-payment. Anyone mints.
contract ReentrantToken is ERC20 {
    ITreasury private immutable _treasury;
    bool public armed;

    constructor(ITreasury treasury) ERC20("Reentrant", "REENT") {
        _treasury = treasury;
    }

    /// @notice Mint `amount` to `to` (test token: anyone may).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice Call back into the Treasury from every transfer (or stop).
    function arm(bool value) external {
        armed = value;
    }

    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (armed && from != address(0)) _treasury.withdrawTo(address(this), address(this));
    }
}

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";

/// @title PermitToken: a test ERC-20 with EIP-2612 permit and any decimals (18 in most tests); anyone mints
contract PermitToken is ERC20, ERC20Permit {
    uint8 private immutable _decimals;

    constructor(uint8 decimals_) ERC20("Permit Token", "PRMT") ERC20Permit("Permit Token") {
        _decimals = decimals_;
    }

    /// @notice Mint `amount` to `to` (test token: anyone may).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @inheritdoc ERC20
    function decimals() public view override returns (uint8) {
        return _decimals;
    }
}

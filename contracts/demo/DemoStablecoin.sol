// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";

/// @title DemoStablecoin: a 6-decimal dollar token with EIP-2612 permit, for `fedchain demo --token` only
/// @notice Whoever deployed it mints (the demo mints every role's float); it has no value anywhere.
contract DemoStablecoin is ERC20, ERC20Permit {
    /// @notice Only the deployer mints.
    /// @param caller the rejected caller
    error DemoStablecoinNotMinter(address caller);

    address private immutable _minter;

    constructor() ERC20("FedChain Demo Dollar", "fcUSD") ERC20Permit("FedChain Demo Dollar") {
        _minter = msg.sender;
    }

    /// @notice Mint `amount` (6 decimals) to `to`. Deployer only.
    function mint(address to, uint256 amount) external {
        if (msg.sender != _minter) revert DemoStablecoinNotMinter(msg.sender);
        _mint(to, amount);
    }

    /// @inheritdoc ERC20
    function decimals() public pure override returns (uint8) {
        return 6;
    }
}

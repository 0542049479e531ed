// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title FalseToken: a test token that returns false instead of reverting when a transfer cannot happen
/// @notice Short balance or allowance, or `refuse` switched on: transfer and transferFrom return false and move
/// nothing. A caller that ignores the bool would count money that never came. Anyone mints.
contract FalseToken {
    string public constant name = "False Token";
    string public constant symbol = "FALSE";
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    bool public refuse;
    mapping(address account => uint256) public balanceOf;
    mapping(address owner => mapping(address spender => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    /// @notice Mint `amount` to `to` (test token: anyone may).
    function mint(address to, uint256 amount) external {
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    /// @notice Make every transfer return false (or stop doing so).
    function setRefuse(bool value) external {
        refuse = value;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        return _move(msg.sender, to, value);
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed < value) return false;
        if (!_move(from, to, value)) return false;
        allowance[from][msg.sender] = allowed - value;
        return true;
    }

    function _move(address from, address to, uint256 value) private returns (bool) {
        if (refuse || balanceOf[from] < value) return false;
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
        return true;
    }
}

"""The forecasters' peak backtests, the lowest reachable peak error, the rule choice on saved forecasts and training speed."""

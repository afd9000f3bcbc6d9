"""Private file edges: JSON reading (`jsonio`, `jsonscan`), the path policy (`paths`), atomic outputs (`atomic`)."""

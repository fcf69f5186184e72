"""HTTP headers of the API that clients send, in a module of their own: the SDK's client
loads it without the API's models (``spec/api.py`` serves it too)."""

# An admin acting as another user (``server/auth.py``): every request made so is audited
# with both names; anyone else sending it is refused.
ACT_AS_HEADER = "X-Phalanx-Act-As"

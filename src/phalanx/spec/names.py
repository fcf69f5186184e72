"""Plain names of the API that clients use, in a module of their own so that a client
loads them without the spec's models (``spec/api.py`` and ``spec/planes.py`` serve them
too): the act-as header and the compute planes' names.
"""

# An admin acting as another user (``server/auth.py``): every request made so is audited
# with both names; anyone else sending it is refused.
ACT_AS_HEADER = "X-Phalanx-Act-As"

# Every node carries its compute plane as the topmost topology level.
PLANE_LABEL = "phalanx.dev/plane"
# The in-process plane of `phalanx up`.
LOCAL_PLANE = "local"

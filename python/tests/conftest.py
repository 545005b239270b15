import os
import sys

# The tests import ranks.py from here; the package comes from PYTHONPATH
# (<build>/python, as ctest sets it) or from an installed wheel.
sys.path.insert(0, os.path.dirname(__file__))

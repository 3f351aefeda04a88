import subprocess
import sys


def test_sdk_never_imports_torch_or_the_trainer():
    code = ("import sys, sdk, sdk.tensorfile, sdk.images, sdk.text_encoder, sdk.preprocessing; "
            "bad = [m for m in ('torch', 'trainer', 'export', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)

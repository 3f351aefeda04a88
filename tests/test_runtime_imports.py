import subprocess
import sys


def test_sdk_never_imports_torch_or_the_trainer():
    code = ("import sys, sdk, sdk.tensorfile, sdk.images, sdk.text_encoder, sdk.preprocessing; "
            "bad = [m for m in ('torch', 'trainer', 'export', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_trainer_without_torch_says_which_extra_to_install():
    code = ("import sys, runpy; sys.modules['torch'] = None; sys.argv = ['-m', '--help']; "
            "runpy.run_module('trainer', run_name='__main__', alter_sys=True)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "taper-sdk[train]" in result.stderr


def test_reprs_are_short(tiny_bundle):
    import sdk

    bundle = sdk.load(tiny_bundle)
    model = sdk.personalize(bundle, "round shapes")
    assert len(repr(model)) < 300 and "PersonalizedModel(classes=[" in repr(model)
    assert len(repr(bundle)) < 300 and "24 classes" in repr(bundle)

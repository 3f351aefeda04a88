"""Images, files and pages: what comes in from a camera or a folder and what goes out to a person. Imports nothing
else of the SDK (but its errors).

- `images`: decoding any image into uint8 RGB arrays;
- `resample`: the one bilinear resampling every runtime repeats;
- `preprocessing`: resize, crop and normalize: the contract training and the runtime share;
- `files`: writing files all or nothing;
- `report_page`: self-contained HTML result pages and terminal text;
- `cache`: where derived files live.
"""

__all__ = ["images", "resample", "preprocessing", "files", "report_page", "cache"]

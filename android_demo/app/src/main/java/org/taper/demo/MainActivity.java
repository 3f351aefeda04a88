package org.taper.demo;

import android.app.Activity;
import android.content.Intent;
import android.graphics.Bitmap;
import android.graphics.BitmapFactory;
import android.net.Uri;
import android.os.Bundle;
import android.os.Handler;
import android.os.Looper;
import android.widget.Button;
import android.widget.EditText;
import android.widget.ImageView;
import android.widget.TextView;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import org.taper.sdk.format.BundleException;
import org.taper.sdk.text.DescriptionException;
import org.taper.sdk.PersonalizedModel;
import org.taper.sdk.Personalizer;
import org.taper.sdk.media.Preprocessing;
import org.taper.sdk.engines.XnnpackProgram;

/**
 * Pick a bundle, type what you care about, see the chosen classes and how long personalization took; then
 * take or pick a photo and see the top-3 labels with their probabilities and the inference time. Everything
 * runs on the device (the manifest asks for no network permission). Work happens on one background thread;
 * the views are touched on the main thread only.
 * <p>Not compiled or run on the repository's test machines (no Android SDK, no Maven): see ../README.md.
 */
public final class MainActivity extends Activity {
    private static final int PICK_BUNDLE = 1, PICK_PHOTO = 2, TAKE_PHOTO = 3, PICK_PROGRAM = 4;
    /** Photos are decoded at most this large (the network sees 64 or 224 px; a 48 MP photo would not fit in memory). */
    private static final int MAX_PHOTO_SIDE = 1024;

    private final ExecutorService worker = Executors.newSingleThreadExecutor();
    private final Handler main = new Handler(Looper.getMainLooper());
    private Personalizer personalizer;   // touched on the worker thread only
    private PersonalizedModel model;     // touched on the worker thread only

    private TextView bundleStatus, task, predictions;
    private EditText description;
    private Button personalize, pickPhoto, takePhoto, pickProgram;
    private ImageView photo;

    @Override
    protected void onCreate(Bundle state) {
        super.onCreate(state);
        setContentView(R.layout.activity_main);
        bundleStatus = findViewById(R.id.bundle_status);
        task = findViewById(R.id.task);
        predictions = findViewById(R.id.predictions);
        description = findViewById(R.id.description);
        personalize = findViewById(R.id.personalize);
        pickPhoto = findViewById(R.id.pick_photo);
        takePhoto = findViewById(R.id.take_photo);
        pickProgram = findViewById(R.id.pick_program);
        photo = findViewById(R.id.photo);
        findViewById(R.id.pick_bundle).setOnClickListener(v -> startActivityForResult(
                new Intent(Intent.ACTION_OPEN_DOCUMENT).addCategory(Intent.CATEGORY_OPENABLE).setType("*/*"), PICK_BUNDLE));
        pickProgram.setOnClickListener(v -> startActivityForResult(
                new Intent(Intent.ACTION_OPEN_DOCUMENT).addCategory(Intent.CATEGORY_OPENABLE).setType("*/*"), PICK_PROGRAM));
        personalize.setOnClickListener(v -> personalize(description.getText().toString()));
        pickPhoto.setOnClickListener(v -> startActivityForResult(
                new Intent(Intent.ACTION_GET_CONTENT).addCategory(Intent.CATEGORY_OPENABLE).setType("image/*"), PICK_PHOTO));
        // The camera app's thumbnail: no CAMERA permission needed for this intent.
        takePhoto.setOnClickListener(v -> startActivityForResult(new Intent("android.media.action.IMAGE_CAPTURE"), TAKE_PHOTO));
    }

    // The camera's thumbnail comes as the "data" extra; Bundle.get is deprecated from API 33, whose typed
    // getParcelable(String, Class) a minSdk-24 app cannot call.
    @SuppressWarnings("deprecation")
    @Override
    protected void onActivityResult(int request, int result, Intent data) {
        super.onActivityResult(request, result, data);
        if (result != RESULT_OK || data == null) return;
        if (request == PICK_BUNDLE && data.getData() != null) loadBundle(data.getData());
        else if (request == PICK_PROGRAM && data.getData() != null) loadProgram(data.getData());
        else if (request == PICK_PHOTO && data.getData() != null) classify(data.getData(), null);
        else if (request == TAKE_PHOTO && data.getExtras() != null) classify(null, (Bitmap) data.getExtras().get("data"));
    }

    /** Copies the picked bundle into app storage (the core maps a file), then opens and checks it. */
    private void loadBundle(Uri uri) {
        bundleStatus.setText("Loading…");
        worker.execute(() -> {
            File target = new File(getFilesDir(), "bundle.taper"), partial = new File(getFilesDir(), "bundle.taper.partial");
            try {
                copy(uri, partial);
                closeAll();
                if (!partial.renameTo(target)) throw new IOException("could not move the bundle into app storage");
                long start = System.nanoTime();
                personalizer = Personalizer.load(target.getPath(), new OnnxEngine(engineThreads()));
                String text = String.format(Locale.ROOT, "%d classes, loaded and checked in %.0f ms",
                        personalizer.classes().size(), (System.nanoTime() - start) / 1e6);
                main.post(() -> { bundleStatus.setText(text); personalize.setEnabled(true); pickProgram.setEnabled(true); });
            } catch (IOException | BundleException e) {
                partial.delete();   // never leave a half-copied bundle behind
                // The previous bundle stays usable if the copy failed before closeAll.
                boolean usable = personalizer != null, classifies = usable && model != null;
                main.post(() -> {
                    bundleStatus.setText("Not a usable bundle: " + e.getMessage());
                    personalize.setEnabled(usable);
                    pickProgram.setEnabled(usable);
                    pickPhoto.setEnabled(classifies);
                    takePhoto.setEnabled(classifies);
                });
            }
        });
    }

    /** Threads for either engine's backbone: half the cores, so the UI thread and the system keep some. */
    private static int engineThreads() {
        return Math.max(1, Runtime.getRuntime().availableProcessors() / 2);
    }

    /** The picked file, copied to {@code partial} in app storage (the caller renames it into place). */
    private void copy(Uri uri, File partial) throws IOException {
        try (InputStream in = getContentResolver().openInputStream(uri); OutputStream out = new FileOutputStream(partial)) {
            if (in == null) throw new IOException("the picked file cannot be read");
            byte[] buffer = new byte[1 << 16];
            for (int n; (n = in.read(buffer)) > 0; ) out.write(buffer, 0, n);
        }
    }

    /** The bundle's ExecuTorch companion: checked against the loaded bundle, then personalize() runs the
     * backbone on ExecuTorch (ExecuTorchEngine) instead of onnxruntime. */
    private void loadProgram(Uri uri) {
        bundleStatus.setText("Loading the ExecuTorch program…");
        worker.execute(() -> {
            File target = new File(getFilesDir(), "bundle.taper.xnnpack"), partial = new File(getFilesDir(), "bundle.taper.xnnpack.partial");
            try {
                copy(uri, partial);
                // Checked before it replaces anything; the mapping stays valid when the file is renamed.
                XnnpackProgram program = XnnpackProgram.open(partial.getPath(), personalizer.bundle());
                if (!partial.renameTo(target)) throw new IOException("could not move the program into app storage");
                org.taper.sdk.format.Bundle bundle = personalizer.bundle();
                closeAll();
                personalizer = new Personalizer(bundle, new ExecuTorchEngine(program, getFilesDir(), engineThreads()));
                main.post(() -> {
                    bundleStatus.setText("ExecuTorch (XNNPACK) runs the backbone from now on: personalize again");
                    pickPhoto.setEnabled(false);
                    takePhoto.setEnabled(false);
                });
            } catch (IOException | BundleException e) {
                partial.delete();   // never leave a half-copied file behind; the current engine stays
                main.post(() -> bundleStatus.setText("Not a usable ExecuTorch companion: " + e.getMessage()));
            }
        });
    }

    private void personalize(String text) {
        task.setText("Personalizing…");
        worker.execute(() -> {
            try {
                PersonalizedModel next = personalizer.personalize(text);
                if (model != null) model.close();
                model = next;
                String shown = String.format(Locale.ROOT, "%d classes in %.1f ms: %s", next.classes().size(),
                        next.timings().get("total"), String.join(", ", next.classes()));
                main.post(() -> { task.setText(shown); pickPhoto.setEnabled(true); takePhoto.setEnabled(true); });
            } catch (DescriptionException e) {
                main.post(() -> task.setText(e.getMessage()));
            }
        });
    }

    private void classify(Uri uri, Bitmap thumbnail) {
        predictions.setText("Classifying…");
        worker.execute(() -> {
            try {
                Bitmap bitmap = thumbnail != null ? thumbnail : decode(uri);
                int w = bitmap.getWidth(), h = bitmap.getHeight();
                int[] pixels = new int[w * h];
                bitmap.getPixels(pixels, 0, w, 0, 0, w, h);
                long start = System.nanoTime();
                List<PersonalizedModel.Prediction> top3 = model.predict(Preprocessing.fromArgb(pixels), w, h);
                double ms = (System.nanoTime() - start) / 1e6;
                StringBuilder shown = new StringBuilder();
                for (PersonalizedModel.Prediction p : top3)
                    shown.append(String.format(Locale.ROOT, "%s  %.1f%%%n", p.label, 100 * p.probability));
                shown.append(String.format(Locale.ROOT, "inference %.1f ms (preprocessing included)", ms));
                main.post(() -> { photo.setImageBitmap(bitmap); predictions.setText(shown.toString()); });
            } catch (IOException | IllegalArgumentException e) {
                main.post(() -> predictions.setText("Not a usable image: " + e.getMessage()));
            }
        });
    }

    /** The picked image, subsampled by a power of two until its longer side is at most MAX_PHOTO_SIDE. */
    private Bitmap decode(Uri uri) throws IOException {
        BitmapFactory.Options bounds = new BitmapFactory.Options();
        bounds.inJustDecodeBounds = true;
        try (InputStream in = getContentResolver().openInputStream(uri)) {
            BitmapFactory.decodeStream(in, null, bounds);
        }
        if (bounds.outWidth <= 0 || bounds.outHeight <= 0) throw new IOException("not an image Android can decode");
        BitmapFactory.Options options = new BitmapFactory.Options();
        options.inSampleSize = 1;
        while (Math.max(bounds.outWidth, bounds.outHeight) / options.inSampleSize > MAX_PHOTO_SIDE) options.inSampleSize *= 2;
        options.inPreferredConfig = Bitmap.Config.ARGB_8888;
        try (InputStream in = getContentResolver().openInputStream(uri)) {
            Bitmap bitmap = BitmapFactory.decodeStream(in, null, options);
            if (bitmap == null) throw new IOException("not an image Android can decode");
            return bitmap;
        }
    }

    private void closeAll() {
        if (model != null) model.close();
        if (personalizer != null) personalizer.close();
        model = null;
        personalizer = null;
    }

    @Override
    protected void onDestroy() {
        worker.execute(this::closeAll);
        worker.shutdown();
        super.onDestroy();
    }
}

package dev.hyspec.engine;

import dev.hyspec.backend.Backend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.config.HyspecConfig;
import dev.hyspec.model.HybridModel;
import dev.hyspec.tokenizer.ChatTemplate;
import dev.hyspec.tokenizer.Tokenizer;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.CodeSource;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.jboss.logging.Logger;

/**
 * Loads the configured checkpoint at startup and holds it for the rest of the application. With no
 * {@code hyspec.model.path} it serves the embedded default model, {@value #EMBEDDED_MODEL}, found
 * relative to the working directory or to the application's own location (the repository root above
 * {@code target/quarkus-app/}).
 */
@ApplicationScoped
public class ModelRegistry {
    private static final Logger LOG = Logger.getLogger(ModelRegistry.class);
    /** The embedded default model, a folder of the repository (tools/train-demo-model made it). */
    public static final String EMBEDDED_MODEL = "models/kjv-hybrid";

    private final HyspecConfig config;
    private volatile LoadedModel loaded;
    private Backend backend;

    public ModelRegistry(HyspecConfig config) {
        this.config = config;
    }

    void onStart(@Observes StartupEvent event) {
        Optional<Path> path = config.model().path();
        if (path.isEmpty()) {
            path = embeddedModel(Path.of(""), codeLocation());
            if (path.isEmpty()) {
                LOG.warnf("no model configured and the embedded model %s was not found: set hyspec.model.path to a "
                        + "Hugging Face checkpoint folder", EMBEDDED_MODEL);
                return;
            }
            LOG.infof("hyspec.model.path is not set: serving the embedded model %s", path.get());
        }
        backend = Backends.open(config.backend(), config.activationDtype(), config.stateDtype());
        Path dir = path.get().toAbsolutePath().normalize();
        long start = System.nanoTime();
        HybridModel model = HybridModel.load(Checkpoint.open(dir), backend);
        String id = config.model().name().orElse(dir.getFileName().toString());
        loaded = new LoadedModel(id, dir, model, Tokenizer.load(dir), ChatTemplate.load(dir),
                Instant.now().getEpochSecond());
        LOG.infof("loaded %s (%s, %d blocks) from %s on the %s backend in %d ms", id,
                model.config().architecture().hfName(), model.config().blocks().size(), dir, backend.name(),
                (System.nanoTime() - start) / 1_000_000);
    }

    /**
     * The embedded model's folder: {@code <dir>/}{@value #EMBEDDED_MODEL} for the working directory, then
     * for the application's location and each folder above it; empty if none holds a {@code config.json}.
     */
    static Optional<Path> embeddedModel(Path workingDir, Optional<Path> codeLocation) {
        List<Path> bases = new ArrayList<>();
        bases.add(workingDir.toAbsolutePath());
        codeLocation.ifPresent(loc -> {
            for (Path p = loc.toAbsolutePath(); p != null; p = p.getParent()) {
                bases.add(p);
            }
        });
        return bases.stream().map(b -> b.resolve(EMBEDDED_MODEL).normalize())
                .filter(d -> Files.isRegularFile(d.resolve("config.json"))).findFirst();
    }

    /** Where this class was loaded from (a jar or a classes folder), if known. */
    private static Optional<Path> codeLocation() {
        try {
            CodeSource cs = ModelRegistry.class.getProtectionDomain().getCodeSource();
            return cs == null || cs.getLocation() == null ? Optional.empty()
                    : Optional.of(Path.of(cs.getLocation().toURI()));
        } catch (URISyntaxException | RuntimeException e) {
            return Optional.empty();
        }
    }

    void onStop(@Observes ShutdownEvent event) {
        if (loaded != null) {
            loaded.tokenizer().ifPresent(Tokenizer::close);
        }
        if (backend != null) {
            backend.close();
        }
    }

    /** The served model, once loaded. */
    public Optional<LoadedModel> model() {
        return Optional.ofNullable(loaded);
    }
}

package dev.hyspec.engine;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.config.HyspecConfig;
import dev.hyspec.model.HybridModel;
import dev.hyspec.tokenizer.ChatTemplate;
import dev.hyspec.tokenizer.Tokenizer;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Optional;
import org.jboss.logging.Logger;

/** Loads the configured checkpoint at startup and holds it for the rest of the application. */
@ApplicationScoped
public class ModelRegistry {
    private static final Logger LOG = Logger.getLogger(ModelRegistry.class);

    private final HyspecConfig config;
    private volatile LoadedModel loaded;
    private Backend backend;

    public ModelRegistry(HyspecConfig config) {
        this.config = config;
    }

    void onStart(@Observes StartupEvent event) {
        Optional<Path> path = config.model().path();
        if (path.isEmpty()) {
            LOG.warn("no model configured: set hyspec.model.path to a Hugging Face checkpoint folder");
            return;
        }
        backend = switch (config.backend()) {
            case "cpu" -> new CpuBackend();
            default -> throw new IllegalArgumentException("hyspec.backend=" + config.backend()
                    + " is not available; supported: cpu");
        };
        if (!config.stateDtype().equals("float32")) {
            throw new IllegalArgumentException("hyspec.state-dtype=" + config.stateDtype() + " is not available on the "
                    + config.backend() + " backend, which keeps float32 recurrent state; use float32");
        }
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

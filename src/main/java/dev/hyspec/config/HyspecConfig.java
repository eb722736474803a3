package dev.hyspec.config;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;
import java.nio.file.Path;
import java.util.Optional;

/** hyspec's configuration, every key under {@code hyspec.*} (see the README's table). */
@ConfigMapping(prefix = "hyspec")
public interface HyspecConfig {

    Model model();

    /** Compute backend: {@code cpu} (the pure-Java reference). */
    @WithDefault("cpu")
    String backend();

    interface Model {
        /** A Hugging Face checkpoint folder to serve. */
        Optional<Path> path();

        /** The id clients use for the model; default: the checkpoint folder's name. */
        Optional<String> name();
    }
}

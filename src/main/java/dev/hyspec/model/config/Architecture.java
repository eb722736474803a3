package dev.hyspec.model.config;

import java.util.Arrays;
import java.util.Optional;
import java.util.stream.Collectors;

/** The checkpoint architectures hyspec runs, by their {@code config.json} {@code architectures} name. */
public enum Architecture {
    MAMBA2("Mamba2ForCausalLM"),
    NEMOTRON_H("NemotronHForCausalLM"),
    QWEN3_NEXT("Qwen3NextForCausalLM"),
    QWEN3_5("Qwen3_5ForCausalLM");

    private final String hfName;

    Architecture(String hfName) {
        this.hfName = hfName;
    }

    public String hfName() {
        return hfName;
    }

    public static Optional<Architecture> fromHfName(String name) {
        return Arrays.stream(values()).filter(a -> a.hfName.equals(name)).findFirst();
    }

    public static String supportedNames() {
        return Arrays.stream(values()).map(Architecture::hfName).collect(Collectors.joining(", "));
    }
}

package dev.hyspec.deploy;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;
import io.smallrye.config.WithName;
import io.smallrye.config.WithParentName;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * The configuration keys an application accepts, read off its {@link ConfigMapping} interface the
 * way SmallRye Config names them: a method's name in kebab case unless {@link WithName} gives one,
 * a nested group interface adding its name as a prefix. Deploy manifests are checked against this,
 * so a key renamed in the mapping fails the check instead of being silently ignored in production.
 */
final class ConfigKeys {

    /**
     * One leaf key.
     *
     * @param name         the full key, e.g. {@code hyspec.scheduler.max-num-seqs}
     * @param type         the type its value converts to ({@code Optional} unwrapped)
     * @param defaultValue the {@link WithDefault} value, if any
     */
    record Key(String name, Class<?> type, Optional<String> defaultValue) {

        /** The environment variable SmallRye maps to this key: {@code HYSPEC_SCHEDULER_MAX_NUM_SEQS}. */
        String envName() {
            return name.replaceAll("[^A-Za-z0-9]", "_").toUpperCase();
        }
    }

    private ConfigKeys() {
    }

    /** Every leaf key of {@code mapping}, by name. */
    static Map<String, Key> of(Class<?> mapping) {
        ConfigMapping annotation = mapping.getAnnotation(ConfigMapping.class);
        if (annotation == null) {
            throw new IllegalArgumentException(mapping + " is not annotated @ConfigMapping");
        }
        Map<String, Key> keys = new TreeMap<>();
        walk(mapping, annotation.prefix(), keys);
        return keys;
    }

    private static void walk(Class<?> group, String prefix, Map<String, Key> keys) {
        for (Method m : group.getMethods()) {
            if (Modifier.isStatic(m.getModifiers()) || m.isDefault()) {
                continue;
            }
            // Fail loudly on mapping features this walk does not model, rather than derive wrong keys.
            if (m.isAnnotationPresent(WithParentName.class)) {
                throw new IllegalStateException("ConfigKeys does not handle @WithParentName (" + m + ")");
            }
            WithName withName = m.getAnnotation(WithName.class);
            String name = prefix + "." + (withName != null ? withName.value() : kebabCase(m.getName()));
            Class<?> type = valueType(m);
            if (isGroup(type)) {
                walk(type, name, keys);
            } else {
                WithDefault withDefault = m.getAnnotation(WithDefault.class);
                keys.put(name, new Key(name, type, Optional.ofNullable(withDefault).map(WithDefault::value)));
            }
        }
    }

    /** The method's return type, {@code Optional<T>} unwrapped to {@code T}. */
    private static Class<?> valueType(Method m) {
        Type type = m.getGenericReturnType();
        if (type instanceof ParameterizedType p && p.getRawType() == Optional.class) {
            type = p.getActualTypeArguments()[0];
        }
        if (type instanceof Class<?> c) {
            return c;
        }
        throw new IllegalStateException("ConfigKeys does not handle collection or map keys (" + m + ")");
    }

    /** Groups are the application's own interfaces; values are primitives, enums or JDK types. */
    private static boolean isGroup(Class<?> type) {
        return type.isInterface() && !type.getPackageName().startsWith("java.");
    }

    /** {@code maxNumSeqs} → {@code max-num-seqs}, SmallRye's default naming strategy. */
    static String kebabCase(String methodName) {
        return methodName.replaceAll("([a-z0-9])([A-Z])", "$1-$2").toLowerCase();
    }
}

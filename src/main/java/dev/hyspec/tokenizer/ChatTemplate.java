package dev.hyspec.tokenizer;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.el.TruthyTypeConverter;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import com.hubspot.jinjava.objects.date.DateTimeProvider;
import com.hubspot.jinjava.objects.date.StrftimeFormatter;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import jinjava.de.odysseus.el.ExpressionFactoryImpl;
import jinjava.de.odysseus.el.tree.TreeStore;
import jinjava.de.odysseus.el.tree.impl.Cache;
import jinjava.javax.el.CompositeELResolver;
import jinjava.javax.el.ExpressionFactory;

/**
 * A checkpoint's chat template, rendered with Jinjava the way transformers'
 * {@code apply_chat_template} renders it with Jinja2.
 *
 * <p>The template sees {@code messages} (a list of maps with {@code role} and {@code content}),
 * {@code add_generation_prompt}, and {@code bos_token} / {@code eos_token} when
 * {@code tokenizer_config.json} names them (undefined otherwise, as in transformers). Globals:
 * {@code raise_exception(message)} and {@code strftime_now(format)}. As with Hugging Face's Jinja2
 * environment, {@code trim_blocks} and {@code lstrip_blocks} are on, one trailing newline of the
 * template is dropped, {@code {% break %}} / {@code {% continue %}} work, and
 * {@code {% generation %}} blocks render their contents.
 *
 * <p>Python {@code str} methods available on strings: {@code strip}, {@code lstrip},
 * {@code rstrip}, {@code startswith}, {@code endswith}, {@code split}, {@code upper},
 * {@code lower}, {@code title}, {@code capitalize}, {@code replace}, {@code join}; strings and
 * lists take Python indexes and slices, steps included ({@code messages[::-1]}); keyword arguments
 * take whole expressions ({@code namespace(i=messages|length - 1)}). Jinja filters such as
 * {@code trim}, {@code length}, {@code tojson} are Jinjava's. Known differences from Jinja2:
 * none prints as an empty string (Jinja2 prints {@code None}), {@code 'a' ~ true} gives
 * {@code atrue}, and {@code tojson} writes compact JSON ({@code {"a":1}}) where transformers
 * writes {@code {"a": 1}}.
 *
 * <p>Rendering is safe from several threads at once.
 */
public final class ChatTemplate {
    /** The file newer transformers versions save the template in, taking precedence over the JSON. */
    static final String JINJA_FILE_NAME = "chat_template.jinja";

    private static final int EXPRESSION_CACHE_SIZE = 1000;
    private static final Method RAISE_EXCEPTION = staticMethod("raiseException");
    private static final Method STRFTIME_NOW = staticMethod("strftimeNow");

    private final String template;
    private final String source;
    private final Optional<String> bosToken;
    private final Optional<String> eosToken;
    private final Jinjava jinjava;

    private ChatTemplate(
            String template,
            String source,
            Optional<String> bosToken,
            Optional<String> eosToken,
            DateTimeProvider clock) {
        this.template = dropTrailingNewline(template.replace("\r\n", "\n").replace('\r', '\n'));
        this.source = source;
        this.bosToken = bosToken;
        this.eosToken = eosToken;
        this.jinjava = newJinjava(clock);
    }

    /**
     * Loads the chat template of the checkpoint in {@code checkpointDir}: from
     * {@code chat_template.jinja} when present, else from the {@code chat_template} field of
     * {@code tokenizer_config.json} (when that field lists named templates, the one named
     * "default"). BOS and EOS token strings come from {@code tokenizer_config.json}.
     *
     * @return empty when the checkpoint has no chat template
     * @throws TokenizerException naming the file when a file is malformed, or when the template
     *     list has no "default" entry
     */
    public static Optional<ChatTemplate> load(Path checkpointDir) {
        DateTimeProvider clock = System::currentTimeMillis;
        Optional<TokenizerConfig> config = TokenizerConfig.read(checkpointDir);
        Optional<String> bos = config.flatMap(TokenizerConfig::bosToken);
        Optional<String> eos = config.flatMap(TokenizerConfig::eosToken);
        Path jinjaFile = checkpointDir.resolve(JINJA_FILE_NAME);
        if (Files.isRegularFile(jinjaFile)) {
            return Optional.of(new ChatTemplate(JsonFiles.readText(jinjaFile), jinjaFile.toString(), bos, eos, clock));
        }
        return config.flatMap(c -> c.chatTemplate()
                .map(t -> new ChatTemplate(t, c.file() + " (chat_template)", bos, eos, clock)));
    }

    /**
     * A template given as text, e.g. a server-side override of a checkpoint's own.
     *
     * @param bosToken the value of {@code bos_token}, or null to leave it undefined
     * @param eosToken the value of {@code eos_token}, or null to leave it undefined
     */
    public static ChatTemplate of(String template, String bosToken, String eosToken) {
        return of(template, bosToken, eosToken, System::currentTimeMillis);
    }

    static ChatTemplate of(String template, String bosToken, String eosToken, DateTimeProvider clock) {
        return new ChatTemplate(
                template, "chat template", Optional.ofNullable(bosToken), Optional.ofNullable(eosToken), clock);
    }

    /**
     * Renders the prompt for {@code messages}; with {@code addGenerationPrompt} the template appends
     * the opening of an assistant turn.
     *
     * @throws IllegalArgumentException when the template calls {@code raise_exception}, with the
     *     template's message as its own; the template rejects this conversation
     * @throws TokenizerException naming the template's file when the template itself fails
     *     (syntax error, unknown tag, failing call)
     */
    public String render(List<ChatMessage> messages, boolean addGenerationPrompt) {
        List<Map<String, Object>> turns = new ArrayList<>(messages.size());
        for (ChatMessage message : messages) {
            Map<String, Object> turn = new LinkedHashMap<>();
            turn.put("role", message.role());
            turn.put("content", message.content());
            turns.add(turn);
        }
        Map<String, Object> bindings = new HashMap<>();
        bindings.put("messages", turns);
        bindings.put("add_generation_prompt", addGenerationPrompt);
        bosToken.ifPresent(t -> bindings.put("bos_token", t));
        eosToken.ifPresent(t -> bindings.put("eos_token", t));

        RenderResult result = jinjava.renderForResult(template, bindings);
        // Jinjava records failures and renders on; Jinja2 stops at the first, so the first raise wins.
        for (TemplateError error : result.getErrors()) {
            for (Throwable cause = error.getException(); cause != null; cause = cause.getCause()) {
                if (cause instanceof RaisedException raised) {
                    throw new IllegalArgumentException(raised.getMessage());
                }
            }
        }
        List<String> fatal = result.getErrors().stream()
                .filter(e -> e.getSeverity() == TemplateError.ErrorType.FATAL)
                .map(e -> describe(e))
                .collect(Collectors.toList());
        if (!fatal.isEmpty()) {
            throw new TokenizerException(source + ": the chat template failed to render: " + String.join("; ", fatal));
        }
        return result.getOutput();
    }

    /** Where the template came from, for messages: a file path, or "chat template" for {@link #of}. */
    public String source() {
        return source;
    }

    private static String describe(TemplateError error) {
        String message = error.getMessage() == null ? error.getReason().toString() : error.getMessage();
        Throwable root = error.getException();
        while (root != null && root.getCause() != null) {
            root = root.getCause();
        }
        if (root != null && root.getMessage() != null && !message.contains(root.getMessage())) {
            message += " (" + root.getMessage() + ")";
        }
        return "line " + error.getLineno() + ": " + message.replace('\n', ' ');
    }

    private static String dropTrailingNewline(String template) {
        return template.endsWith("\n") ? template.substring(0, template.length() - 1) : template;
    }

    private static Jinjava newJinjava(DateTimeProvider clock) {
        CompositeELResolver resolver = new CompositeELResolver();
        resolver.add(new PythonStringMethods());
        resolver.add(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY);
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withTrimBlocks(true)
                .withLstripBlocks(true)
                .withElResolver(resolver)
                .withDateTimeProvider(clock)
                .withInterperterFactory(new PythonInterpreter.Factory())
                // Each of these replaces a Jinjava quirk with Jinja2's behaviour; the remaining
                // override, whitespaceRequiredWithinTokens, would reject "{{'a'}}", which Jinja2 accepts.
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withEvaluateMapKeys(true)
                        .withIterateOverMapKeys(true)
                        .withUsePyishObjectMapper(true)
                        .withUseNaturalOperatorPrecedence(true)
                        .withParseWhitespaceControlStrictly(true)
                        .withUseTrimmingForNotesAndExpressions(true)
                        .withKeepNullableLoopValues(true)
                        .build())
                .build();
        ExpressionFactory expressions = new ExpressionFactoryImpl(
                new TreeStore(new PythonSyntaxParser.SyntaxBuilder(), new Cache(EXPRESSION_CACHE_SIZE)),
                new TruthyTypeConverter());
        Jinjava jinjava = new Jinjava(config) {
            @Override
            public ExpressionFactory getExpressionFactory() {
                return expressions;
            }
        };
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", RAISE_EXCEPTION));
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "strftime_now", STRFTIME_NOW));
        jinjava.getGlobalContext().registerTag(new GenerationTag());
        return jinjava;
    }

    private static Method staticMethod(String name) {
        try {
            Method method = ChatTemplate.class.getDeclaredMethod(name, Object.class);
            // Jinjava invokes it reflectively from its own package.
            method.setAccessible(true);
            return method;
        } catch (NoSuchMethodException e) {
            throw new AssertionError(e);
        }
    }

    private static String raiseException(Object message) {
        throw new RaisedException(String.valueOf(message));
    }

    private static String strftimeNow(Object format) {
        JinjavaInterpreter interpreter = JinjavaInterpreter.getCurrent();
        long millis = interpreter == null
                ? System.currentTimeMillis()
                : interpreter.getConfig().getDateTimeProvider().getCurrentTimeMillis();
        // Python's datetime.now() is local time, and strftime's names are the C locale's (English).
        return StrftimeFormatter.format(
                Instant.ofEpochMilli(millis).atZone(ZoneId.systemDefault()), String.valueOf(format), Locale.ENGLISH);
    }

    /** What {@code raise_exception} throws inside Jinjava, to be found again among its errors. */
    private static final class RaisedException extends RuntimeException {
        RaisedException(String message) {
            super(message, null, false, false);
        }
    }
}
